#if Sync
/// Order keys: for the Postgres types whose replica text does not order as Postgres orders
/// them, the replica keeps beside the column a key whose bytes do (SQLite compares blobs with
/// `memcmp`), in a column named `ripple_order:<column>`. Queries compare and order by the key;
/// the text travels to clients.
///
/// | Type | Postgres orders | Key |
/// |---|---|---|
/// | `numeric` | by value (`10` > `9`, `1.5` = `1.50`); `NaN` above every number | class, then the decimal exponent and digits (inverted for negatives) |
/// | `date`, `timestamp`, `timestamptz` | by time; `-infinity`/`infinity` at the ends; BC before AD | class, the signed year, then the rest of the text |
/// | `bpchar` | by bytes, ignoring trailing spaces | the text's bytes without its trailing spaces |
enum OrderKeys {
    /// Whether columns of type `oid` keep an order key.
    static func applies(to oid: UInt32) -> Bool {
        switch oid {
        case PostgresTypes.OID.numeric, PostgresTypes.OID.date, PostgresTypes.OID.timestamp, PostgresTypes.OID.timestamptz,
             PostgresTypes.OID.bpchar: true
        default: false
        }
    }

    /// The name of the order key column of `column`.
    static func column(for column: String) -> String { "ripple_order:" + column }

    /// The key of a value of type `oid` in its Postgres text form.
    ///
    /// - Throws: ``QueryError`` when the text is not a value of the type.
    static func key(_ text: String, of oid: UInt32) throws -> [UInt8] {
        switch oid {
        case PostgresTypes.OID.numeric: try numeric(text)
        case PostgresTypes.OID.date: try time(text, zoned: false, withTime: false)
        case PostgresTypes.OID.timestamp: try time(text, zoned: false, withTime: true)
        case PostgresTypes.OID.timestamptz: try time(text, zoned: true, withTime: true)
        default: Array(text.utf8.reversed().drop(while: { $0 == UInt8(ascii: " ") }).reversed())
        }
    }

    /// A decimal's key: `NaN` above +∞ above positives above zero above negatives above −∞. A
    /// finite non-zero value is 0.d₁d₂… × 10^e with d₁ ≠ 0 and no trailing zero digit: positives
    /// compare by e then by the digits (a shorter prefix is smaller), negatives the same with
    /// every byte inverted and a high terminator (a longer one of the same prefix is smaller).
    static func numeric(_ text: String) throws -> [UInt8] {
        switch text.lowercased() {
        case "nan": return [6]
        case "infinity", "+infinity", "inf": return [5]
        case "-infinity", "-inf": return [1]
        default: break
        }
        var characters = Substring(text)
        var negative = false
        if characters.first == "-" || characters.first == "+" {
            negative = characters.first == "-"
            characters = characters.dropFirst()
        }
        var exponent = 0
        if let e = characters.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let value = Int(characters[characters.index(after: e)...]) else { throw QueryError("\(text) is not a number") }
            exponent = value
            characters = characters[..<e]
        }
        let parts = characters.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let whole = parts.first ?? ""
        let fraction = parts.count > 1 ? parts[1] : ""
        guard !(whole.isEmpty && fraction.isEmpty), (whole + fraction).allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw QueryError("\(text) is not a number")
        }
        var digits = Array((whole + fraction).utf8)
        exponent += whole.count
        let leading = digits.prefix(while: { $0 == UInt8(ascii: "0") }).count
        digits.removeFirst(leading)
        exponent -= leading
        while digits.last == UInt8(ascii: "0") { digits.removeLast() }
        guard !digits.isEmpty else { return [3] }
        guard abs(exponent) < 0x7FFF else { throw QueryError("\(text) is beyond numeric's range") }
        let biased = UInt16(exponent + 0x8000)
        if negative {
            let inverted = ~biased
            return [2, UInt8(inverted >> 8), UInt8(inverted & 0xFF)] + digits.map { ~$0 } + [0xFF]
        }
        return [4, UInt8(biased >> 8), UInt8(biased & 0xFF)] + digits
    }

    /// A date or timestamp's key: `-infinity` below every time, `infinity` above; a finite one
    /// is its signed (astronomical) year, then the rest of its ISO text (`-MM-DD HH:MM:SS.ffff`,
    /// whose bytes order as time does: Postgres writes no trailing zero in the fraction). A
    /// `timestamptz` is read in UTC, as the feed's session writes it (`+00`, or `Z`). A query's
    /// value may leave out what Postgres fills in (a timestamp's time, seconds, a fraction's
    /// trailing zeros): it is completed to the form Postgres prints.
    static func time(_ text: String, zoned: Bool, withTime: Bool) throws -> [UInt8] {
        switch text {
        case "-infinity": return [1]
        case "infinity": return [3]
        default: break
        }
        // (Postgres writes a space; a client's literal may use the ISO `T`.)
        var rest = text.utf8.contains(UInt8(ascii: "T")) ? Substring(text.replacingOccurrences(of: "T", with: " ")) : Substring(text)
        var beforeChrist = false
        if rest.hasSuffix(" BC") {
            beforeChrist = true
            rest = rest.dropLast(3)
        }
        if zoned {
            if rest.hasSuffix("Z") {
                rest = rest.dropLast()
            } else if rest.hasSuffix("+00:00") {
                rest = rest.dropLast(6)
            } else if rest.hasSuffix("+00") {
                rest = rest.dropLast(3)
            } else {
                throw QueryError("\(text) is not a UTC time (end it with +00 or Z)")
            }
        }
        guard let dash = rest.firstIndex(of: "-"), let year = Int32(rest[..<dash]), year >= 0 else {
            throw QueryError("\(text) is not a date or time in ISO form (YYYY-MM-DD[ HH:MM:SS[.ffffff]])")
        }
        var clock = String(rest[dash...])
        if withTime {
            let parts = clock.split(separator: " ", maxSplits: 1)
            var time = parts.count > 1 ? String(parts[1]) : "00:00:00"
            if time.split(separator: ":").count == 2 { time += ":00" }
            if time.contains(".") {
                while time.hasSuffix("0") { time.removeLast() }
                if time.hasSuffix(".") { time.removeLast() }
            }
            clock = String(parts[0]) + " " + time
        }
        let signed = beforeChrist ? 1 - year : year
        let biased = UInt32(bitPattern: signed) ^ 0x8000_0000
        return [2, UInt8(biased >> 24), UInt8((biased >> 16) & 0xFF), UInt8((biased >> 8) & 0xFF), UInt8(biased & 0xFF)]
            + Array(clock.utf8)
    }
}
#endif

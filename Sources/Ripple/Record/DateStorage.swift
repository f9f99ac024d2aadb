import Foundation

/// How a `Date` is stored: the number of seconds since 1970-01-01 00:00:00 UTC, exactly.
///
/// A `Date` is a Double of seconds since 2001-01-01 (its reference date). Seconds since 1970 are
/// that Double plus 978 307 200; the sum is exact, but it is often not a Double: for today's
/// dates it needs one binary digit more than a Double holds, so a REAL of seconds since 1970
/// (the Double `timeIntervalSince1970`) loses the last digit of about half of them. The stored
/// forms keep the exact sum:
///
/// * **Before 1970**: a REAL, the Double `timeIntervalSince1970`. It is exact there: adding
///   978 307 200 to a Double below −978 307 200 gives a smaller magnitude, on a grid as fine.
/// * **From 1970 on**: text, the exact decimal number, its integer part zero-padded to 12 digits
///   and its fraction without trailing zeros: `001748779496.12345678901234567890125`. The
///   fraction of a Double always ends after finitely many decimal digits.
///
/// Both are numbers of seconds since 1970, as earlier versions stored (the REAL
/// `timeIntervalSince1970`, in a `REAL` column), and both read as such in SQL:
/// `datetime(due, 'unixepoch')`. That keeps every store written before readable and writable
/// unchanged: a `REAL` column converts the text (a decimal number) to its REAL, and converts the
/// text of a filter's constant too, so comparisons there are between numbers, as they were.
///
/// In a column declared `ANY` (what a collection's new table declares for a date), the values
/// stay as given, and SQLite orders them as the dates: every number (before 1970) before every
/// text (from 1970 on); numbers by value; texts of equal width by their bytes, which is their
/// numeric order. No two dates share a form, so `=`, `<` and `ORDER BY` agree with `Date`'s `==`
/// and `<`.
///
/// Dates from the year 33658 on (10¹² seconds since 1970), and NaN, have no form: the text
/// would need a 13th digit and sort before shorter ones. Neither do dates more than 3·10¹⁰
/// years before 2001, where adding 978 307 200 rounds.
enum DateStorage {
    /// Seconds from 1970-01-01 to 2001-01-01: a whole number, exact in a Double.
    static let offset: Double = 978_307_200
    private static let offsetInteger: UInt64 = 978_307_200
    /// The first interval since 2001 without a stored form (10¹² seconds since 1970).
    static let end: Double = 999_021_692_800
    /// The digits of the integer part of the text form.
    static let integerDigits = 12
    /// The longest text the fast path writes: 12 digits, a point, 60 fraction digits.
    static let fastTextCapacity = 73

    /// A date's stored form, handed to a caller without allocating (text in a temporary buffer;
    /// only a fraction of more than 60 binary digits, within 2⁻⁸ s of 2001, is built in an array).
    enum Form {
        case real(Double)
        case text(UnsafeBufferPointer<UInt8>)
    }

    /// Calls `body` with the stored form of `date`.
    ///
    /// - Throws: ``StoreError/Kind/encoding`` for a date without a stored form (NaN, from the
    ///   year 33658 on, or more than 3·10¹⁰ years before 2001 where the sum is not exact).
    @inline(__always)
    static func withForm<R>(_ date: Date, _ body: (Form) throws -> R) throws -> R {
        let interval = date.timeIntervalSinceReferenceDate
        if interval < -offset {
            let seconds = interval + offset
            guard seconds - offset == interval else { throw refusal(interval) }
            return try body(.real(seconds))
        }
        guard interval < end else { throw refusal(interval) }   // NaN fails too
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: fastTextCapacity) { buffer in
            if let count = writeText(interval, into: buffer.baseAddress!) {
                return try body(.text(UnsafeBufferPointer(rebasing: buffer[..<count])))
            }
            let text = slowText(interval)
            return try text.withUnsafeBufferPointer { try body(.text($0)) }
        }
    }

    /// The stored form of `date` as a value.
    static func sqlValue(_ date: Date) throws(StoreError) -> SQLValue {
        do {
            return try withForm(date) { form in
                switch form {
                case .real(let seconds): .real(seconds)
                case .text(let bytes): .text(String(decoding: bytes, as: UTF8.self))
                }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.encoding, "\(error)")
        }
    }

    static func refusal(_ interval: Double) -> StoreError {
        if interval.isNaN { return StoreError(.encoding, "a Date of NaN seconds cannot be stored") }
        if interval >= end {
            return StoreError(.encoding, "\(Date(timeIntervalSinceReferenceDate: interval)) (\(interval) s after 2001) cannot be stored: "
                              + "dates are stored up to 10^12 s after 1970 (the year 33658)")
        }
        return StoreError(.encoding, "a Date of \(interval) s after 2001 cannot be stored exactly as seconds since 1970")
    }

    // MARK: Reading

    /// The date of a stored number of seconds since 1970 (a REAL, or an integer).
    @inline(__always)
    static func date(seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    /// The date of a stored text: exact for the text of ``withForm(_:_:)``; for another decimal
    /// number of seconds since 1970, the nearest date; `nil` for text that is not a number.
    static func date(text: UnsafeBufferPointer<UInt8>) -> Date? {
        // The form written: digits, then optionally a point and digits. The integer part is read
        // whatever its width (up to 15 digits, exact in a Double once 1970's offset is taken off).
        let point: Int
        if text.count > integerDigits && text[integerDigits] == UInt8(ascii: ".") {
            point = integerDigits
        } else if text.count == integerDigits {
            point = integerDigits
        } else {
            point = text.firstIndex(of: UInt8(ascii: ".")) ?? text.count
        }
        guard point > 0, point <= 15, let integer = number(UnsafeBufferPointer(rebasing: text[..<point])) else {
            return numericDate(text)
        }
        let whole = Double(Int64(integer) - Int64(offsetInteger))
        if point == text.count { return Date(timeIntervalSinceReferenceDate: whole) }
        guard point + 1 < text.count else { return numericDate(text) }
        let fraction = UnsafeBufferPointer(rebasing: text[(point + 1)...])
        // A fraction of n decimal digits is a binary fraction q / 2ⁿ when its digits, as a
        // number D, are a multiple of 5ⁿ: q = D / 5ⁿ. Then the interval is whole + q·2⁻ⁿ, two
        // exact Doubles whose sum rounds once, to the nearest Double (the exact one for
        // Ripple's text). For n ≤ 27, D fits in 128 bits and q (below 2ⁿ) in 64: q is D times
        // the inverse of 5ⁿ modulo 2⁶⁴, checked by multiplying back.
        if fraction.count <= 27 {
            // The first 19 digits, then the others.
            guard let first = number(UnsafeBufferPointer(rebasing: fraction.prefix(19))),
                  let rest = number(UnsafeBufferPointer(rebasing: fraction.dropFirst(19))) else { return numericDate(text) }
            let count = fraction.count
            var digits = count > 19 ? first.multipliedFullWidth(by: powersOfTen[count - 19]) : (high: 0, low: first)
            let (low, carry) = digits.low.addingReportingOverflow(rest)
            digits = (digits.high &+ (carry ? 1 : 0), low)
            let quotient = low &* inversePowersOfFive[count]
            let product = quotient.multipliedFullWidth(by: powersOfFive[count])
            if product.high == digits.high && product.low == digits.low {
                let scale = Double(bitPattern: UInt64(1023 - count) << 52)   // 2⁻ⁿ, a normal Double
                return Date(timeIntervalSinceReferenceDate: whole + Double(quotient) * scale)
            }
        }
        guard fraction.allSatisfy({ digitValue($0) != nil }) else { return numericDate(text) }
        var count = fraction.count
        while count > 0 && fraction[count - 1] == UInt8(ascii: "0") { count -= 1 }
        if count == 0 { return Date(timeIntervalSinceReferenceDate: whole) }
        return decimalDate(integer: integer, fraction: UnsafeBufferPointer(rebasing: fraction[..<count]))
    }

    /// 10⁰ … 10¹⁹.
    private static let powersOfTen: [UInt64] = [
        1, 10, 100, 1_000, 10_000,
        100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000,
        10_000_000_000, 100_000_000_000, 1_000_000_000_000, 10_000_000_000_000, 100_000_000_000_000,
        1_000_000_000_000_000, 10_000_000_000_000_000, 100_000_000_000_000_000, 1_000_000_000_000_000_000, 10_000_000_000_000_000_000,
    ]
    /// 5⁰ … 5²⁷ (below 2⁶³).
    private static let powersOfFive: [UInt64] = [
        1, 5, 25, 125, 625,
        3_125, 15_625, 78_125, 390_625, 1_953_125,
        9_765_625, 48_828_125, 244_140_625, 1_220_703_125, 6_103_515_625,
        30_517_578_125, 152_587_890_625, 762_939_453_125, 3_814_697_265_625, 19_073_486_328_125,
        95_367_431_640_625, 476_837_158_203_125, 2_384_185_791_015_625, 11_920_928_955_078_125, 59_604_644_775_390_625,
        298_023_223_876_953_125, 1_490_116_119_384_765_625, 7_450_580_596_923_828_125,
    ]
    /// The inverses of 5⁰ … 5²⁷ modulo 2⁶⁴ (5ⁿ · inverse wraps to 1).
    private static let inversePowersOfFive: [UInt64] = [
        0x1, 0xCCCC_CCCC_CCCC_CCCD, 0x8F5C_28F5_C28F_5C29, 0x1CAC_0831_26E9_78D5,
        0xD288_CE70_3AFB_7E91, 0x5D4E_8FB0_0BCB_E61D, 0x790F_B656_68C2_6139, 0xE503_2477_AE8D_46A5,
        0xC767_074B_22E9_0E21, 0x8E47_CE42_3A2E_9C6D, 0x4FA7_F60D_3ED6_1F49, 0x0FEE_6469_0C91_3975,
        0x3662_E0E1_CF50_3EB1, 0xA47A_2CF9_F643_3FBD, 0x5418_6F65_3140_A659, 0x7738_1647_7040_2145,
        0xE4A4_D141_7CD9_A041, 0xC754_29D9_E5C5_200D, 0xC177_3B91_FAC1_0669, 0x26B1_7250_6559_CE15,
        0xD489_E3A9_ADDE_C2D1, 0x90E8_60BB_892C_8D5D, 0x502E_79BF_1B6F_4F79, 0xDCD6_1859_6BE3_0FE5,
        0x2C2A_D1AB_7BFA_3661, 0x08D5_5D22_4BFE_D7AD, 0x01C4_45D3_A8CC_9189, 0xCD27_412A_54F5_B6B5,
    ]

    /// The number the decimal digits of `bytes` spell (at most 19 of them), or `nil` when one is
    /// not a digit: eight digits at a time, in one 64-bit word.
    @inline(__always)
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        var index = 0
        if let base = bytes.baseAddress {
            while bytes.count - index >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                // Every byte a digit: its high nibble is 3, and adding 6 keeps it 3.
                guard word & 0xF0F0_F0F0_F0F0_F0F0 == 0x3030_3030_3030_3030,
                      (word &+ 0x0606_0606_0606_0606) & 0xF0F0_F0F0_F0F0_F0F0 == 0x3030_3030_3030_3030 else { return nil }
                // The first digit is the lowest byte: combine pairs, then pairs of pairs, then halves.
                var digits = word & 0x0F0F_0F0F_0F0F_0F0F
                digits = (digits &* 10 &+ (digits >> 8)) & 0x00FF_00FF_00FF_00FF
                digits = (digits &* 100 &+ (digits >> 16)) & 0x0000_FFFF_0000_FFFF
                digits = (digits &* 10_000 &+ (digits >> 32)) & 0xFFFF_FFFF
                value = value &* 100_000_000 &+ digits
                index += 8
            }
        }
        while index < bytes.count {
            guard let digit = digitValue(bytes[index]) else { return nil }
            value = value &* 10 &+ UInt64(digit)
            index += 1
        }
        return value
    }

    @inline(__always)
    private static func digitValue(_ byte: UInt8) -> UInt8? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? byte &- UInt8(ascii: "0") : nil
    }

    /// The nearest date to `integer.fraction` seconds since 1970: 1970's offset is subtracted in
    /// decimal (exactly), and the difference rounded once by the standard library's parser.
    private static func decimalDate(integer: UInt64, fraction: UnsafeBufferPointer<UInt8>) -> Date? {
        let digits = String(decoding: fraction, as: UTF8.self)
        let difference: String
        if integer >= offsetInteger {
            difference = "\(integer - offsetInteger).\(digits)"
        } else {
            // −(J − f) = −((J − 1) + (1 − f)), and 1 − 0.d₁…dₙ is 0.(9−d₁)…(9−dₙ₋₁)(10−dₙ).
            var complement = fraction.map { UInt8(ascii: "9") - ($0 - UInt8(ascii: "0")) }
            complement[complement.count - 1] += 1
            difference = "-\(offsetInteger - integer - 1)." + String(decoding: complement, as: UTF8.self)
        }
        return Double(difference).map { Date(timeIntervalSinceReferenceDate: $0) }
    }

    /// A number in another spelling (a sign, an exponent, surrounding spaces): the nearest date
    /// to the nearest Double of seconds since 1970.
    private static func numericDate(_ text: UnsafeBufferPointer<UInt8>) -> Date? {
        let allowed = Set("0123456789+-.eE \t\n\r".utf8)
        guard !text.isEmpty, text.allSatisfy(allowed.contains) else { return nil }
        let string = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Double(string).map(date(seconds:))
    }

    // MARK: Writing the text

    /// The decimal digits of seconds since 1970 for an interval since 2001 in
    /// `-offset ..< end`, written to `buffer` (``fastTextCapacity`` bytes); the count, or `nil`
    /// when the fraction has more than 60 binary digits (within 2⁻⁸ s of 2001-01-01 00:00:00,
    /// left to ``slowText(_:)``).
    @inline(__always)
    static func writeText(_ interval: Double, into buffer: UnsafeMutablePointer<UInt8>) -> Int? {
        var integer = offsetInteger   // whole seconds since 1970
        var fraction: UInt64 = 0      // the rest, in units of 2^-bits
        var bits = 0
        if interval != 0 {
            // |interval| = significand · 2^exponent, the significand odd.
            let magnitude = interval.magnitude
            let biased = Int(magnitude.exponentBitPattern)
            var significand = magnitude.significandBitPattern | (biased == 0 ? 0 : 1 << 52)
            let zeros = significand.trailingZeroBitCount
            significand >>= UInt64(zeros)
            let exponent = (biased == 0 ? -1074 : biased - 1075) + zeros
            if exponent >= 0 {
                let whole = significand << UInt64(exponent)   // below 10¹²
                integer = interval > 0 ? integer + whole : integer - whole
            } else {
                bits = -exponent
                guard bits <= 60 else { return nil }
                let whole = significand >> UInt64(bits)
                let part = significand & ((1 << UInt64(bits)) - 1)   // odd: the significand is
                if interval > 0 {
                    integer += whole
                    fraction = part
                } else {
                    integer -= whole + 1
                    fraction = (1 << UInt64(bits)) - part
                }
            }
        }
        writeDigits(integer, count: integerDigits, to: buffer)
        guard bits > 0 else { return integerDigits }
        // An odd number of 2^-bits has exactly `bits` decimal digits, the last a 5. They come
        // in chunks of k digits: (fraction · 10^k) >> bits, the rest kept below 2^bits, with
        // fraction · 10^k below 2^64 (10^k ≤ 2^(64 − bits)).
        buffer[integerDigits] = UInt8(ascii: ".")
        let digits = buffer + integerDigits + 1
        let chunk = (64 - bits) * 30_102 / 100_000   // ⌊(64 − bits) · log₁₀ 2⌋, or one less
        let mask: UInt64 = (1 << UInt64(bits)) - 1
        var written = 0
        while written < bits {
            let count = min(chunk, bits - written)
            let scaled = fraction &* powersOfTen[count]
            writeDigits(scaled >> UInt64(bits), count: count, to: digits + written)
            fraction = scaled & mask
            written += count
        }
        return integerDigits + 1 + bits
    }

    /// Writes `value` as `count` decimal digits (zero-padded; `value` below 10^count): eight at a
    /// time from the right, each eight as two independent halves of two pairs.
    @inline(__always)
    private static func writeDigits(_ value: UInt64, count: Int, to out: UnsafeMutablePointer<UInt8>) {
        var value = value
        var end = count
        while end >= 8 {
            let block = value % 100_000_000
            value /= 100_000_000
            end -= 8
            let high = block / 10_000, low = block % 10_000
            writePair(high / 100, to: out + end)
            writePair(high % 100, to: out + end + 2)
            writePair(low / 100, to: out + end + 4)
            writePair(low % 100, to: out + end + 6)
        }
        while end >= 2 {
            end -= 2
            writePair(value % 100, to: out + end)
            value /= 100
        }
        if end == 1 { out[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value) }
    }

    @inline(__always)
    private static func writePair(_ pair: UInt64, to out: UnsafeMutablePointer<UInt8>) {
        let pair = UInt8(truncatingIfNeeded: pair)
        out[0] = UInt8(ascii: "0") &+ pair / 10
        out[1] = UInt8(ascii: "0") &+ pair % 10
    }

    /// The text of an interval whose fraction has more than 60 binary digits (|interval| < 2⁻⁸),
    /// with a fraction of up to 1 074 digits, made a digit at a time on 32-bit limbs.
    static func slowText(_ interval: Double) -> [UInt8] {
        let magnitude = interval.magnitude
        let biased = Int(magnitude.exponentBitPattern)
        var significand = magnitude.significandBitPattern | (biased == 0 ? 0 : 1 << 52)
        let zeros = significand.trailingZeroBitCount
        significand >>= UInt64(zeros)
        let bits = -((biased == 0 ? -1074 : biased - 1075) + zeros)
        precondition(bits > 60 && magnitude < 1, "slowText for \(interval)")
        // The fraction as a number of 2^-bits, little-endian limbs with room for 4 more bits.
        var limbs = [UInt32](repeating: 0, count: (bits + 4) / 32 + 1)
        limbs[0] = UInt32(truncatingIfNeeded: significand)
        limbs[1] = UInt32(truncatingIfNeeded: significand >> 32)
        if interval < 0 {   // 2^bits − significand
            var borrow: UInt64 = 0
            for index in limbs.indices {
                let top: UInt64 = index == bits / 32 ? 1 << UInt64(bits % 32) : 0
                let difference = top &- UInt64(limbs[index]) &- borrow
                limbs[index] = UInt32(truncatingIfNeeded: difference)
                borrow = difference >> 63
            }
        }
        let integer = String(interval > 0 ? offsetInteger : offsetInteger - 1)
        var text = Array((String(repeating: "0", count: integerDigits - integer.count) + integer).utf8)
        text.append(UInt8(ascii: "."))
        let topLimb = bits / 32, topShift = UInt32(bits % 32)
        while limbs.contains(where: { $0 != 0 }) {
            var carry: UInt64 = 0
            for index in limbs.indices {
                let product = UInt64(limbs[index]) * 10 + carry
                limbs[index] = UInt32(truncatingIfNeeded: product)
                carry = product >> 32
            }
            // The digit is the value's bits from `bits` up; then they are cleared.
            var digit = UInt64(limbs[topLimb]) >> UInt64(topShift)
            if topLimb + 1 < limbs.count && topShift > 0 { digit |= UInt64(limbs[topLimb + 1]) << UInt64(32 - topShift) }
            text.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: digit))
            limbs[topLimb] &= topShift == 0 ? 0 : (UInt32(1) << topShift) - 1
            for index in (topLimb + 1)..<limbs.count { limbs[index] = 0 }
        }
        return text
    }

    // MARK: JSON

    /// How dates are written in JSON (nested values): as a number (before 1970) or a string
    /// (from 1970 on), the two stored forms.
    @Sendable static func encodeJSON(_ date: Date, to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch try sqlValue(date) {
        case .real(let seconds): try container.encode(seconds)
        case .text(let text): try container.encode(text)
        default: preconditionFailure("a date's stored form is a REAL or text")
        }
    }

    /// Reads a date written in JSON: a number of seconds since 1970 (as earlier versions wrote
    /// every date; the distant −∞ is the string `"-Infinity"`, JSON having no such number), or
    /// the text form.
    @Sendable static func decodeJSON(from decoder: any Decoder) throws -> Date {
        let container = try decoder.singleValueContainer()
        if let seconds = try? container.decode(Double.self) { return date(seconds: seconds) }
        var text = try container.decode(String.self)
        guard let date = text.withUTF8(date(text:)) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "\(text.debugDescription) is not a date")
        }
        return date
    }
}

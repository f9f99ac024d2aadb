/// Whether SQLite's numeric affinities (INTEGER, REAL, NUMERIC) turn a text into a number when
/// it is stored: the text is a decimal number — an optional sign, digits with an optional point,
/// an optional exponent — with nothing else but white space around it (`'5'`, `' 5 '`, `'007'`,
/// `'1e3'`, `'.5'`), as SQLite's own parser reads numbers. Hexadecimal, `Infinity`, an empty text,
/// and text holding anything else (a NUL included) stay text.
enum NumericText {
    static func isNumber(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
        var index = 0
        let end = utf8.count
        while index < end && isSpace(utf8[index]) { index += 1 }
        if index < end && (utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-")) { index += 1 }
        var digits = 0
        while index < end && isDigit(utf8[index]) { index += 1; digits += 1 }
        if index < end && utf8[index] == UInt8(ascii: ".") {
            index += 1
            while index < end && isDigit(utf8[index]) { index += 1; digits += 1 }
        }
        guard digits > 0 else { return false }
        if index < end && (utf8[index] == UInt8(ascii: "e") || utf8[index] == UInt8(ascii: "E")) {
            index += 1
            if index < end && (utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-")) { index += 1 }
            var exponentDigits = 0
            while index < end && isDigit(utf8[index]) { index += 1; exponentDigits += 1 }
            guard exponentDigits > 0 else { return false }
        }
        while index < end && isSpace(utf8[index]) { index += 1 }
        return index == end
    }
}

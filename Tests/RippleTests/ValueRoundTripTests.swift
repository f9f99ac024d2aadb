import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Issue 25, "What you store is what you read": a record read back after it is written is `==`
/// to the record written, for every kind of value a record can hold, and filters and orderings
/// on a column agree with Swift's `==` and `<` on the values stored there.
@Suite struct ValueRoundTripTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    // MARK: The record

    /// A nested value (stored as JSON): the same kinds of value again, inside JSON.
    struct Inner: Codable, Sendable, Equatable {
        var date: Date
        var decimal: Decimal
        var double: Double
        var float: Float
        var big: UInt64
        var text: String
        var data: Data
        var url: URL
        var uuid: UUID
        var numbers: [Int64]
        var maybe: Int?
    }

    enum Kind: String, Codable, Sendable, CaseIterable {
        case plain
        case fancy = "fäncy e\u{301} 🎉"
        case empty = ""
    }

    enum Level: Int, Codable, Sendable, CaseIterable {
        case lowest = -9_223_372_036_854_775_808
        case zero = 0
        case highest = 9_223_372_036_854_775_807
    }

    enum Payload: Codable, Sendable, Equatable, CaseIterable {
        case none
        case point(x: Double, y: Double)
        case tagged(String, Date)
        case nested(Inner)

        // The first case for schema discovery: a payload enum with a String is not plain data.
        static var allCases: [Payload] { [.none] }
    }

    /// Every kind of value a record can hold.
    struct Values: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var date: Date
        var optionalDate: Date?
        var decimal: Decimal
        var optionalDecimal: Decimal?
        var url: URL
        var uuid: UUID
        var data: Data
        var bytes: [UInt8]
        var int8: Int8
        var int16: Int16
        var int32: Int32
        var int64: Int64
        var int: Int
        var uint8: UInt8
        var uint16: UInt16
        var uint32: UInt32
        var uint64: UInt64
        var double: Double
        var float: Float
        var flag: Bool
        var text: String
        var optionalText: String?
        var kind: Kind
        var level: Level
        var payload: Payload
        var inner: Inner
        var optionalInner: Inner?
        var counts: [String: Int]
        var innerByName: [String: Inner]
        var list: [Inner]
        var strings: [String]
        var dates: [Date]
    }

    // MARK: Generators

    /// Seconds between 1970-01-01 and 2001-01-01 (`Date`'s reference date).
    static let offset = 978_307_200.0

    /// Dates that reach the awkward corners on purpose: the sub-microsecond digits of `Date()`,
    /// neighbours one Double apart, both sides of 1970, 2001 and its tiny offsets (subnormal
    /// intervals), the distant past and future, whole seconds.
    static func randomDate(_ random: inout SeededGenerator) -> Date {
        let interval: Double
        switch Int.random(in: 0..<10, using: &random) {
        case 0: interval = [Date.distantPast, .distantFuture][Int.random(in: 0...1, using: &random)].timeIntervalSinceReferenceDate
        case 1: interval = [-offset, (-offset).nextUp, (-offset).nextDown, 0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
                            1e-300, -1e-300, .leastNormalMagnitude, 0.5, -0.5, -.infinity][Int.random(in: 0..<12, using: &random)]
        case 2: interval = Double.random(in: -offset ... -offset + 1, using: &random)
        case 3: interval = Double.random(in: -1...1, using: &random) * pow(10, Double.random(in: -30...0, using: &random))
        case 4: interval = Double(Int64.random(in: -63_113_904_000...63_113_904_000, using: &random))
        case 5: interval = Double.random(in: -6e10 ... -offset, using: &random)
        case 6: interval = Double.random(in: 6e10 ..< 9e11, using: &random)
        default: interval = Double.random(in: 6e8 ..< 1.2e9, using: &random)   // today's dates, every bit random
        }
        var date = Date(timeIntervalSinceReferenceDate: interval)
        if interval.isFinite && Bool.random(using: &random) {
            date = Date(timeIntervalSinceReferenceDate: Bool.random(using: &random) ? interval.nextUp : interval.nextDown)
        }
        return date
    }

    static func randomDecimal(_ random: inout SeededGenerator) -> Decimal {
        let special: [Decimal] = [0, 1, -1, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
                                  -.leastNonzeroMagnitude, Decimal(string: "0.1")!, Decimal(string: "3.14159265358979323846264338327950288")!,
                                  Decimal(sign: .plus, exponent: -3, significand: 1000)]
        if Int.random(in: 0..<4, using: &random) == 0 { return special.randomElement(using: &random)! }
        while true {
            let count = Int.random(in: 1...38, using: &random)
            let digits = String((0..<count).map { index in
                Character(String(Int.random(in: index == 0 ? 1...9 : 0...9, using: &random)))
            })
            let sign: FloatingPointSign = Bool.random(using: &random) ? .plus : .minus
            let exponent = Int.random(in: -128...127, using: &random) - (count - 1) / 2
            let value = Decimal(sign: sign, exponent: exponent, significand: Decimal(string: digits)!)
            if !value.isNaN { return value }
        }
    }

    static let urls: [URL] = [
        URL(string: "https://example.com")!,
        URL(string: "https://example.com/a%20b/c?q=%F0%9F%8E%89&x=1#frag")!,
        URL(string: "https://例え.jp/ü?q=a b")!,
        URL(string: "https://user:pass@example.com:8443/p;params?x=%2F")!,
        URL(string: "http://[::1]:8080/")!,
        URL(string: "foo/bar")!,
        URL(string: "../up/one")!,
        URL(string: "?query=only")!,
        URL(string: "#fragment")!,
        URL(string: "mailto:someone@example.com")!,
        URL(string: "urn:isbn:0451450523")!,
        URL(string: "data:text/plain;base64,SGVsbG8=")!,
        URL(string: "file:///tmp/a%20b/%C3%BC")!,
        URL(fileURLWithPath: "/tmp/dir with spaces/ü", isDirectory: true),
        URL(fileURLWithPath: "/tmp/file name.txt", isDirectory: false),
    ]

    static func randomURL(_ random: inout SeededGenerator) -> URL {
        if Bool.random(using: &random) { return urls.randomElement(using: &random)! }
        let segment = randomText(&random, pool: [" ", "a", "é", "/", "?", "#", "%", "日", "🎉", "-", "e\u{301}"])
        if Bool.random(using: &random) { return URL(fileURLWithPath: "/tmp/" + segment) }
        let encoded = segment.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!
        return URL(string: "https://h\(Int.random(in: 0..<9, using: &random)).example/" + encoded)!
    }

    /// Scalars that trip text handling: NUL and control characters, quotes and escapes, combining
    /// marks and their precomposed forms, the edges of the planes, a zero-width joiner.
    static let scalars: [String] = [
        "a", "Z", "0", " ", "\0", "\u{1}", "\n", "\r", "\t", "\"", "\\", "'", "%", "_", "é", "e", "\u{301}", "\u{308}",
        "ä", "ñ", "ß", "İ", "ı", "Å", "\u{212B}", "ﬁ", "日", "本", "🎉", "\u{1F469}", "\u{200D}", "\u{FEFF}", "\u{7F}",
        "\u{80}", "\u{D7FF}", "\u{E000}", "\u{FFFF}", "\u{10FFFF}",
    ]

    static func randomText(_ random: inout SeededGenerator, pool: [String] = scalars) -> String {
        (0..<Int.random(in: 0...12, using: &random)).map { _ in pool.randomElement(using: &random)! }.joined()
    }

    static func randomData(_ random: inout SeededGenerator) -> Data {
        let count = [0, 1, 16, Int.random(in: 0..<300, using: &random), Int.random(in: 0..<70_000, using: &random)]
            .randomElement(using: &random)!
        let zeros = Bool.random(using: &random)
        return Data((0..<count).map { _ in zeros && Bool.random(using: &random) ? 0 : UInt8.random(in: 0...255, using: &random) })
    }

    static func randomDouble(_ random: inout SeededGenerator) -> Double {
        let special: [Double] = [0, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                                 .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude, .ulpOfOne, 1.0 / 3, 0.1]
        switch Int.random(in: 0..<3, using: &random) {
        case 0: return special.randomElement(using: &random)!
        case 1: return Double.random(in: -1e6...1e6, using: &random)
        default:
            while true {
                let value = Double(bitPattern: random.next())
                if !value.isNaN { return value }
            }
        }
    }

    static func randomFloat(_ random: inout SeededGenerator) -> Float {
        let special: [Float] = [0, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude,
                                -.leastNonzeroMagnitude, .leastNormalMagnitude, 0.1]
        if Bool.random(using: &random) { return special.randomElement(using: &random)! }
        while true {
            let value = Float(bitPattern: UInt32(truncatingIfNeeded: random.next()))
            if !value.isNaN { return value }
        }
    }

    static func randomInteger<I: FixedWidthInteger>(_ random: inout SeededGenerator, in range: ClosedRange<I> = I.min...I.max) -> I {
        let special: [I] = [range.lowerBound, range.upperBound, 0, 1, range.lowerBound == 0 ? 2 : -1]
        return Bool.random(using: &random) ? special.randomElement(using: &random)! : I.random(in: range, using: &random)
    }

    static func randomUUID(_ random: inout SeededGenerator) -> UUID {
        var bytes = [UInt8]((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) })
        if Int.random(in: 0..<5, using: &random) == 0 { bytes = Array(repeating: Bool.random(using: &random) ? 0 : 0xFF, count: 16) }
        return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }

    static func randomInner(_ random: inout SeededGenerator) -> Inner {
        Inner(date: randomDate(&random), decimal: randomDecimal(&random), double: randomDouble(&random),
              float: randomFloat(&random), big: randomInteger(&random), text: randomText(&random), data: randomData(&random),
              url: randomURL(&random), uuid: randomUUID(&random),
              numbers: (0..<Int.random(in: 0...4, using: &random)).map { _ in randomInteger(&random) },
              maybe: Bool.random(using: &random) ? randomInteger(&random) : nil)
    }

    static func randomValues(_ random: inout SeededGenerator, id: Int) -> Values {
        Values(
            id: id, date: randomDate(&random), optionalDate: Bool.random(using: &random) ? randomDate(&random) : nil,
            decimal: randomDecimal(&random), optionalDecimal: Bool.random(using: &random) ? randomDecimal(&random) : nil,
            url: randomURL(&random), uuid: randomUUID(&random), data: randomData(&random),
            bytes: [UInt8](randomData(&random)), int8: randomInteger(&random), int16: randomInteger(&random),
            int32: randomInteger(&random), int64: randomInteger(&random), int: randomInteger(&random),
            uint8: randomInteger(&random), uint16: randomInteger(&random), uint32: randomInteger(&random),
            uint64: randomInteger(&random, in: 0...UInt64(Int64.max)), double: randomDouble(&random), float: randomFloat(&random),
            flag: Bool.random(using: &random), text: randomText(&random),
            optionalText: Bool.random(using: &random) ? randomText(&random) : nil,
            kind: Kind.allCases.randomElement(using: &random)!, level: Level.allCases.randomElement(using: &random)!,
            payload: [.none, .point(x: randomDouble(&random), y: randomDouble(&random)),
                      .tagged(randomText(&random), randomDate(&random)), .nested(randomInner(&random))].randomElement(using: &random)!,
            inner: randomInner(&random), optionalInner: Bool.random(using: &random) ? randomInner(&random) : nil,
            counts: Dictionary((0..<Int.random(in: 0...3, using: &random)).map { _ in (randomText(&random), randomInteger(&random)) },
                               uniquingKeysWith: { first, _ in first }),
            innerByName: Dictionary((0..<Int.random(in: 0...2, using: &random)).map { _ in (randomText(&random), randomInner(&random)) },
                                    uniquingKeysWith: { first, _ in first }),
            list: (0..<Int.random(in: 0...2, using: &random)).map { _ in randomInner(&random) },
            strings: (0..<Int.random(in: 0...3, using: &random)).map { _ in randomText(&random) },
            dates: (0..<Int.random(in: 0...3, using: &random)).map { _ in randomDate(&random) })
    }

    // MARK: Round trips

    /// Seeded random records: each is read back `==` (by id, in a query, through raw SQL), after
    /// an insert and after an update.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomRecordsReadBackEqual(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let store = try Store(path: directory.path("random-\(seed).sqlite"))
        let collection = try store.collection("values", of: Values.self)
        var records = (0..<200).map { Self.randomValues(&random, id: $0) }
        try collection.insert(contentsOf: records)
        try expectStored(records, in: collection, seed: seed)

        for index in records.indices where Bool.random(using: &random) {
            records[index] = Self.randomValues(&random, id: index)
        }
        try collection.upsert(contentsOf: records)
        try expectStored(records, in: collection, seed: seed)
        let raw = try store.read { db in try db.fetchAll(Values.self, "SELECT * FROM \"values\" ORDER BY id") }
        #expect(raw == records, "seed \(seed): raw SQL")
    }

    func expectStored(_ records: [Values], in collection: RecordCollection<Values>, seed: UInt64,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let read = try collection.order(by: Column("id")).fetchAll()
        #expect(read.count == records.count, sourceLocation: sourceLocation)
        for (written, back) in zip(records, read) where written != back {
            Issue.record("seed \(seed), record \(written.id): \(Self.differences(written, back))", sourceLocation: sourceLocation)
        }
        for record in records.prefix(20) {
            #expect(try collection.fetch(id: record.id) == record, "seed \(seed), record \(record.id)", sourceLocation: sourceLocation)
        }
    }

    /// The properties that differ, written and read: a failure names the values, not two records.
    static func differences(_ written: Values, _ back: Values) -> String {
        let writtenMirror = Mirror(reflecting: written), backMirror = Mirror(reflecting: back)
        return zip(writtenMirror.children, backMirror.children).compactMap { left, right in
            String(reflecting: left.value) == String(reflecting: right.value) ? nil
                : "\(left.label ?? "?"): wrote \(String(reflecting: left.value)), read \(String(reflecting: right.value))"
        }.joined(separator: "; ")
    }

    struct Moment: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var date: Date
        var dates: [Date]
    }

    /// The reported defect: a `Date` with digits below the microsecond came back 1e-7 s off.
    @Test func aDateWithSubMicrosecondDigitsReadsBackEqual() throws {
        let store = try Store(path: directory.path("now.sqlite"))
        let moments = try store.collection("moments", of: Moment.self)
        // 2025-05-28 03:33:20 and 2⁻²³ s: seconds since 1970 (a larger number) have no Double
        // that holds that last bit.
        let date = Date(timeIntervalSinceReferenceDate: 770_000_000 + 0x1p-23)
        let now = Date()
        try moments.insert(contentsOf: [Moment(id: 1, date: date, dates: [date]), Moment(id: 2, date: now, dates: [now])])
        #expect(try moments.fetch(id: 1) == Moment(id: 1, date: date, dates: [date]))
        #expect(try moments.fetch(id: 2) == Moment(id: 2, date: now, dates: [now]))
        #expect(try moments.filter(Column("date") == date).fetchAll().map(\.id) == [1])
    }

    /// Why the column cannot simply keep a Double of seconds since 1970: for a date of today with
    /// its last bit set, no Double of seconds since 1970 converts back to it (the subtraction of
    /// 1970's offset is exact there, so only t + offset itself would do, and it is not a Double).
    @Test func noDoubleOfSecondsSince1970HoldsEveryDate() {
        let interval = 770_000_000 + 0x1p-23
        let date = Date(timeIntervalSinceReferenceDate: interval)
        var candidate = date.timeIntervalSince1970
        for _ in 0..<8 { candidate = candidate.nextDown }
        for _ in 0..<16 {
            #expect(Date(timeIntervalSince1970: candidate) != date, "\(candidate)")
            candidate = candidate.nextUp
        }
    }

    @Test func datesAtTheEdgesReadBackEqual() throws {
        let store = try Store(path: directory.path("edges.sqlite"))
        let moments = try store.collection("moments", of: Moment.self)
        let intervals: [Double] = [
            Date.distantPast.timeIntervalSinceReferenceDate, Date.distantFuture.timeIntervalSinceReferenceDate,
            -Self.offset, (-Self.offset).nextUp, (-Self.offset).nextDown, -Self.offset - 0x1p-23, -Self.offset + 0x1p-23,
            0, -0.0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 1e-300, -1e-300, 0x1p-61, -0x1p-61, 0x1p-60 + 0x1p-110,
            1, -1, 1e-9, 0x1p-27, 0x1p25 + 0x1p-27, 12_345.678_901_234_567, -12_345.678_901_234_567,
            -1e12, -Double.greatestFiniteMagnitude, -.infinity, 9e11, (1e12 - Self.offset).nextDown,
            770_000_000 + 0x1p-23, 1_000_000_000.123_456_7, 63_113_904_000.5,
        ]
        let records = intervals.enumerated().map { index, interval in
            let date = Date(timeIntervalSinceReferenceDate: interval)
            return Moment(id: index, date: date, dates: [date])
        }
        try moments.insert(contentsOf: records)
        for (written, back) in zip(records, try moments.order(by: Column("id")).fetchAll()) {
            #expect(back.date == written.date,
                    "wrote \(written.date.timeIntervalSinceReferenceDate), read \(back.date.timeIntervalSinceReferenceDate)")
            #expect(back.dates == written.dates,
                    "JSON: wrote \(written.date.timeIntervalSinceReferenceDate), read \(back.dates.map(\.timeIntervalSinceReferenceDate))")
        }
    }

    struct Amount: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var value: Decimal
        var values: [Decimal]
    }

    @Test func decimalsReadBackEqual() throws {
        let store = try Store(path: directory.path("decimals.sqlite"))
        let amounts = try store.collection("amounts", of: Amount.self)
        let texts = ["0", "1", "-1", "0.1", "-0.000000000000000000000000000000000000001", "12345678901234567890123456789012345678",
                     "-1234567890123456789012345678901234567.8", "1e127", "-1e-128", "3.14159265358979323846264338327950288", "99.990"]
        var values = texts.map { Decimal(string: $0)! }
        values += [.greatestFiniteMagnitude, .leastNonzeroMagnitude, -.greatestFiniteMagnitude,
                   Decimal(sign: .plus, exponent: -3, significand: 1000), Decimal(sign: .minus, exponent: 100, significand: 7)]
        let records = values.enumerated().map { Amount(id: $0, value: $1, values: [$1, -$1]) }
        try amounts.insert(contentsOf: records)
        #expect(try amounts.order(by: Column("id")).fetchAll() == records)
    }

    struct Link: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var url: URL
        var urls: [URL]
    }

    @Test func urlsReadBackEqual() throws {
        let store = try Store(path: directory.path("urls.sqlite"))
        let links = try store.collection("links", of: Link.self)
        let records = Self.urls.enumerated().map { Link(id: $0, url: $1, urls: [$1]) }
        try links.insert(contentsOf: records)
        for (written, back) in zip(records, try links.order(by: Column("id")).fetchAll()) {
            #expect(back == written, "\(written.url.absoluteString)")
        }
    }

    /// The rule for a URL made relative to a base URL: it is stored as its absolute string, and
    /// reads back as its `absoluteURL` (the same resource, without the base).
    @Test func aURLRelativeToABaseReadsBackAsItsAbsoluteURL() throws {
        let store = try Store(path: directory.path("based.sqlite"))
        let links = try store.collection("links", of: Link.self)
        let based = URL(string: "b/c?x=1", relativeTo: URL(string: "https://example.com/a/")!)!
        try links.insert(Link(id: 1, url: based, urls: [based]))
        let back = try #require(try links.fetch(id: 1))
        #expect(back.url == based.absoluteURL)
        #expect(back.urls == [based.absoluteURL])
    }

    struct Numbers: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var int8: Int8, int16: Int16, int32: Int32, int64: Int64
        var uint8: UInt8, uint16: UInt16, uint32: UInt32, uint64: UInt64
        var double: Double, float: Float
        var nested: [Double]
    }

    @Test func integersAtTheirExtremesReadBackEqual() throws {
        let store = try Store(path: directory.path("integers.sqlite"))
        let numbers = try store.collection("numbers", of: Numbers.self)
        let records = [
            Numbers(id: 1, int8: .min, int16: .min, int32: .min, int64: .min, uint8: 0, uint16: 0, uint32: 0, uint64: 0,
                    double: 0, float: 0, nested: []),
            Numbers(id: 2, int8: .max, int16: .max, int32: .max, int64: .max, uint8: .max, uint16: .max, uint32: .max,
                    uint64: UInt64(Int64.max), double: 0, float: 0, nested: []),
        ]
        try numbers.insert(contentsOf: records)
        #expect(try numbers.order(by: Column("id")).fetchAll() == records)
    }

    /// Doubles and Floats keep every bit, except the sign of zero in a column: SQLite stores a
    /// REAL zero without its sign, so -0.0 reads back as 0.0 (`==` to it). In JSON the sign stays.
    @Test func doublesAndFloatsKeepEveryBit() throws {
        let store = try Store(path: directory.path("doubles.sqlite"))
        let numbers = try store.collection("numbers", of: Numbers.self)
        let doubles: [Double] = [.infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
                                 -.leastNonzeroMagnitude, .leastNormalMagnitude, .leastNormalMagnitude.nextDown, 0.1, 1.0 / 3,
                                 -0.0, 0, 1e308, .leastNonzeroMagnitude.nextUp, .pi]
        let floats: [Float] = [.infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
                               .leastNormalMagnitude.nextDown, 0.1, -0.0, 0, 1.0 / 3, .pi, -.greatestFiniteMagnitude, .leastNonzeroMagnitude.nextUp, 3e38, 7]
        let records = zip(doubles, floats).enumerated().map { index, pair in
            Numbers(id: index, int8: 0, int16: 0, int32: 0, int64: 0, uint8: 0, uint16: 0, uint32: 0, uint64: 0,
                    double: pair.0, float: pair.1, nested: [pair.0, -pair.0])
        }
        try numbers.insert(contentsOf: records)
        for (written, back) in zip(records, try numbers.order(by: Column("id")).fetchAll()) {
            #expect(back == written, "\(written.double), \(written.float)")
            let zero = written.double == 0
            #expect(back.double.bitPattern == (zero ? 0 : written.double.bitPattern), "\(written.double)")
            #expect(back.float.bitPattern == (written.float == 0 ? 0 : written.float.bitPattern), "\(written.float)")
            #expect(back.nested.map(\.bitPattern) == written.nested.map(\.bitPattern), "JSON \(written.nested)")
        }
    }

    /// NaN is refused: SQLite would store NULL, and NaN is never `==` to what is read back anyway.
    @Test func nanIsRefused() throws {
        let store = try Store(path: directory.path("nan.sqlite"))
        let numbers = try store.collection("numbers", of: Numbers.self)
        let record = Numbers(id: 1, int8: 0, int16: 0, int32: 0, int64: 0, uint8: 0, uint16: 0, uint32: 0, uint64: 0,
                             double: 0, float: .nan, nested: [])
        let error = try #require(throws: StoreError.self) { try numbers.insert(record) }
        #expect(error.kind == .encoding)
        #expect(error.message.contains(#"column "float""#), "\(error)")
        #expect(try numbers.count() == 0)
    }

    /// A UInt64 above Int64.max has no SQLite integer: a column refuses it, naming the column. In a
    /// nested value (JSON text) every UInt64 is kept.
    @Test func aUInt64AboveInt64MaxIsRefusedInAColumnAndKeptInJSON() throws {
        struct Counter: Codable, Sendable, Identifiable, Equatable { var id: Int; var count: UInt64; var counts: [UInt64] }
        let store = try Store(path: directory.path("uint64.sqlite"))
        let counters = try store.collection("counters", of: Counter.self)
        let error = try #require(throws: StoreError.self) { try counters.insert(Counter(id: 1, count: .max, counts: [])) }
        #expect(error.kind == .encoding)
        #expect(error.message.contains(#"column "count""#), "\(error)")
        let kept = Counter(id: 2, count: 1, counts: [.max, UInt64(Int64.max) + 1, 0])
        try counters.insert(kept)
        #expect(try counters.fetch(id: 2) == kept)
    }

    struct Note: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var text: String
        var texts: [String]
        var byName: [String: String]
    }

    /// Text keeps every Unicode scalar as written, NUL included; canonically equivalent spellings
    /// (precomposed é, e + combining acute) stay distinct.
    @Test func textKeepsEveryScalar() throws {
        let store = try Store(path: directory.path("text.sqlite"))
        let notes = try store.collection("notes", of: Note.self)
        let texts = ["", "\0", "a\0b", "\0\0", "e\u{301}", "\u{e9}", "\u{212B}", "\u{c5}", "\u{1F469}\u{200D}\u{1F469}", "\r\n",
                     "\u{FEFF}x", "\u{10FFFF}", "quote \" back \\ slash / tab \t", String(repeating: "é", count: 10_000)]
        let records = texts.enumerated().map { Note(id: $0, text: $1, texts: [$1, $1 + "\0"], byName: [$1: $1]) }
        try notes.insert(contentsOf: records)
        for (written, back) in zip(records, try notes.order(by: Column("id")).fetchAll()) {
            #expect(Array(back.text.unicodeScalars) == Array(written.text.unicodeScalars))
            #expect(back.texts.map { Array($0.unicodeScalars) } == written.texts.map { Array($0.unicodeScalars) })
            #expect(back == written)
        }
        let precomposed = try notes.filter(Column("text") == "\u{e9}").fetchAll().map(\.id)
        #expect(precomposed == [5])
    }

    struct Blob: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var data: Data
        var bytes: [UInt8]
        var nested: [Data]
    }

    @Test func bytesReadBackEqual() throws {
        let store = try Store(path: directory.path("bytes.sqlite"))
        let blobs = try store.collection("blobs", of: Blob.self)
        var random = SeededGenerator(seed: 25)
        let large = Data((0..<1_000_000).map { _ in UInt8.random(in: 0...255, using: &random) })
        let samples: [Data] = [Data(), Data([0]), Data([0, 0, 0]), Data([0xFF, 0, 0x80]), large]
        let records = samples.enumerated().map { Blob(id: $0, data: $1, bytes: [UInt8]($1), nested: [$1, Data()]) }
        try blobs.insert(contentsOf: records)
        #expect(try blobs.order(by: Column("id")).fetchAll() == records)
        #expect(try store.read { try $0.fetchValue("SELECT typeof(data) FROM blobs WHERE id = 0", as: String.self) } == "blob")
    }

    /// Nested optionals follow `Codable`'s own rule (as `JSONEncoder` does): `.some(nil)` is
    /// written as nil, so it reads back as nil.
    @Test func nestedOptionalsCollapseToNil() throws {
        struct Maybe: Codable, Sendable, Identifiable, Equatable { var id: Int; var value: Int??; var inner: [Int?] }
        let store = try Store(path: directory.path("optionals.sqlite"))
        let maybes = try store.collection("maybes", of: Maybe.self)
        try maybes.insert(contentsOf: [Maybe(id: 1, value: .some(.some(3)), inner: [nil, 1]),
                                       Maybe(id: 2, value: .some(.none), inner: []), Maybe(id: 3, value: .none, inner: [nil])])
        let back = try maybes.order(by: Column("id")).fetchAll()
        #expect(back.map(\.value) == [.some(.some(3)), .none, .none])
        #expect(back.map(\.inner) == [[nil, 1], [], [nil]])
    }

    /// A wrapper that encodes as one date is stored as a date: exactly, in a date column.
    @Test func aValueThatEncodesAsOneDateIsStoredAsADate() throws {
        struct Stamp: Codable, Sendable, Equatable {
            var date: Date
            init(_ date: Date) { self.date = date }
            init(from decoder: any Decoder) throws { date = try decoder.singleValueContainer().decode(Date.self) }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(date)
            }
        }
        struct Stamped: Codable, Sendable, Identifiable, Equatable { var id: Int; var stamp: Stamp }
        let store = try Store(path: directory.path("stamps.sqlite"))
        let stamps = try store.collection("stamps", of: Stamped.self)
        let records = [Stamped(id: 1, stamp: Stamp(Date(timeIntervalSinceReferenceDate: 770_000_000 + 0x1p-23))),
                       Stamped(id: 2, stamp: Stamp(.distantPast))]
        try stamps.insert(contentsOf: records)
        #expect(try stamps.order(by: Column("id")).fetchAll() == records)
        #expect(try store.read { try $0.fetchValue("SELECT type FROM pragma_table_info('stamps') WHERE name = 'stamp'", as: String.self) } == "ANY")
    }

    /// A date column holds seconds since 1970 that SQL reads as such: a REAL before 1970, decimal
    /// text from 1970 on; SQLite's date functions take both, and SQL orders them as the dates.
    @Test func dateColumnsHoldSecondsSince1970() throws {
        let store = try Store(path: directory.path("forms.sqlite"))
        let moments = try store.collection("moments", of: Moment.self)
        let dates = [Date(timeIntervalSince1970: 1_700_000_000.25), Date(timeIntervalSince1970: -86_400.5), Date(timeIntervalSince1970: 0),
                     Date(timeIntervalSinceReferenceDate: 770_000_000 + 0x1p-23), .distantFuture, .distantPast]
        try moments.insert(contentsOf: dates.enumerated().map { Moment(id: $0, date: $1, dates: [$1]) })
        let rows = try store.read { db in
            try db.fetchAll("SELECT typeof(date), date, datetime(date, 'unixepoch'), dates FROM moments ORDER BY id")
        }.map(\.values)
        #expect(rows[0] == [.text("text"), .text("001700000000.25"), .text("2023-11-14 22:13:20"), .text(#"["001700000000.25"]"#)])
        #expect(rows[1] == [.text("real"), .real(-86_400.5), .text("1969-12-30 23:59:59"), .text("[-86400.5]")])
        #expect(rows[2] == [.text("text"), .text("000000000000"), .text("1970-01-01 00:00:00"), .text(#"["000000000000"]"#)])
        #expect(rows[3][1] == .text("001748307200.00000011920928955078125"))
        #expect(rows[4][2] == .text("4001-01-01 00:00:00"))
        #expect(rows[5][0] == .text("real"))
        let ordered = try store.read { db in try db.fetchAll(Int.self, "SELECT id FROM moments ORDER BY date") }
        #expect(ordered == dates.indices.sorted { dates[$0] < dates[$1] })
    }

    /// Dates without a stored form are refused, naming the column: NaN, and from the year 33658 on
    /// (the text's 12 digits).
    @Test func datesWithoutAStoredFormAreRefused() throws {
        let store = try Store(path: directory.path("far.sqlite"))
        let moments = try store.collection("moments", of: Moment.self)
        for interval in [Double.nan, .infinity, DateStorage.end, 1e300] {
            let error = try #require(throws: StoreError.self) {
                try moments.insert(Moment(id: 1, date: Date(timeIntervalSinceReferenceDate: interval), dates: []))
            }
            #expect(error.kind == .encoding)
            #expect(error.message.contains(#"column "date""#), "\(error)")
        }
        let last = Date(timeIntervalSinceReferenceDate: DateStorage.end.nextDown)
        try moments.insert(Moment(id: 2, date: last, dates: [last]))
        #expect(try moments.fetch(id: 2) == Moment(id: 2, date: last, dates: [last]))
        #expect(try moments.count() == 1)
    }

    /// The text form, tested without SQLite: read back exact, and ordered as the dates, on every
    /// path (whole seconds, 60 fraction bits or fewer, more, before and after 2001).
    @Test(arguments: [21, 22] as [UInt64])
    func dateTextIsExactAndOrdered(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        func text(_ interval: Double) throws -> [UInt8] {
            try DateStorage.withForm(Date(timeIntervalSinceReferenceDate: interval)) { form in
                guard case .text(let bytes) = form else { Issue.record("\(interval) is not stored as text"); return [] }
                return Array(bytes)
            }
        }
        var intervals: [Double] = [-DateStorage.offset, 0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 0x1p-8, -0x1p-8,
                                   0x1p-7, 0x1p-61, DateStorage.end.nextDown, 1e-300, -1e-300]
        for _ in 0..<3_000 {
            let exponent = Double.random(in: -1074 ..< 39.8, using: &random)
            var interval = Double.random(in: 1...2, using: &random) * pow(2, exponent.rounded(.down))
            if Bool.random(using: &random) { interval = -interval }
            if interval >= -DateStorage.offset && interval < DateStorage.end { intervals.append(interval) }
        }
        intervals += intervals.flatMap { [$0.nextUp, $0.nextDown] }.filter { $0 >= -DateStorage.offset && $0 < DateStorage.end }
        let texts = try intervals.map { (interval: $0, text: try text($0)) }
        for entry in texts {
            let back = entry.text.withUnsafeBufferPointer(DateStorage.date(text:))
            #expect(back?.timeIntervalSinceReferenceDate == entry.interval + 0, "\(entry.interval): \(String(decoding: entry.text, as: UTF8.self))")
            // What SQLite reads as a number of seconds since 1970.
            let seconds = Double(String(decoding: entry.text, as: UTF8.self))!
            #expect(abs(seconds - (entry.interval + DateStorage.offset)) <= (entry.interval + DateStorage.offset).ulp)
        }
        let sorted = texts.sorted { $0.interval < $1.interval }
        for (earlier, later) in zip(sorted, sorted.dropFirst()) where earlier.interval < later.interval {
            #expect(earlier.text.lexicographicallyPrecedes(later.text),
                    "\(earlier.interval) \(String(decoding: earlier.text, as: UTF8.self)) ≮ \(String(decoding: later.text, as: UTF8.self))")
        }
    }

    /// Text written by others reads as the nearest date to its number of seconds since 1970.
    @Test func otherNumericTextReadsAsTheNearestDate() {
        func date(_ text: String) -> Double? {
            var text = text
            return text.withUTF8(DateStorage.date(text:))?.timeIntervalSince1970
        }
        #expect(date("1700000000.25") == 1_700_000_000.25)
        #expect(date("1700000000.1") == Date(timeIntervalSince1970: 1_700_000_000.1).timeIntervalSince1970)
        #expect(date("0000001700000000") == 1_700_000_000)
        #expect(date("12.5") == 12.5)
        #expect(date("-12.5") == -12.5)
        #expect(date(" 1.7e9 ") == 1.7e9)
        #expect(date("1700000000.50") == 1_700_000_000.5)
        #expect(date("soon") == nil)
        #expect(date("") == nil)
        #expect(date("12.") == 12)
        // 0.1 s after 1970: the nearest date, subtracting 1970's offset before rounding once.
        #expect(Date(timeIntervalSinceReferenceDate: -DateStorage.offset + 0.1).timeIntervalSinceReferenceDate
                    == { var text = "000000000000.1"; return text.withUTF8(DateStorage.date(text:))?.timeIntervalSinceReferenceDate }())
    }

    /// Dates in JSON written by earlier versions (numbers of seconds since 1970) still read.
    @Test func datesInJSONWrittenAsNumbersStillRead() throws {
        let store = try Store(path: directory.path("json-dates.sqlite"))
        let moments = try store.collection("moments", of: Moment.self)
        try moments.insert(Moment(id: 1, date: Date(timeIntervalSince1970: 0), dates: []))
        try store.write { try $0.execute("UPDATE moments SET dates = '[1700000000.25, -5, 0]'") }
        #expect(try moments.fetch(id: 1)?.dates == [Date(timeIntervalSince1970: 1_700_000_000.25), Date(timeIntervalSince1970: -5),
                                                    Date(timeIntervalSince1970: 0)])
    }

    struct Price: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var amount: Decimal
        var link: URL
    }

    /// A decimal is stored as its text, so a filter finds it by `==` exactly (equal decimals have
    /// one text); `<` compares the text, not the numbers. A URL compares by its absolute string.
    @Test func decimalsAndURLsFilterByEquality() throws {
        let store = try Store(path: directory.path("prices.sqlite"))
        let prices = try store.collection("prices", of: Price.self)
        let amounts = ["9", "10", "-0.5", "12345678901234567890.123456789", "1.50"].map { Decimal(string: $0)! }
        let links = Self.urls.prefix(amounts.count)
        try prices.insert(contentsOf: zip(amounts, links).enumerated().map { Price(id: $0, amount: $1.0, link: $1.1) })
        for (index, amount) in amounts.enumerated() {
            #expect(try prices.filter(Column("amount") == amount).fetchAll().map(\.id) == [index])
        }
        #expect(try prices.filter(Column("amount") == Decimal(sign: .plus, exponent: -2, significand: 150)).fetchAll().map(\.id) == [4])
        #expect(try prices.filter(Column("amount") == Decimal(string: "10.000")!).fetchAll().map(\.id) == [1])
        for (index, link) in links.enumerated() {
            #expect(try prices.filter(Column("link") == link).fetchAll().map(\.id) == [index])
        }
        #expect(try store.read { try $0.fetchValue("SELECT amount FROM prices WHERE id = 4", as: String.self) } == "1.5")
        // Text order: '10' sorts before '9'.
        #expect(try prices.filter(Column("amount") < Decimal(9)).fetchAll().map(\.id).contains(1))
    }

    // MARK: Files of earlier versions

    struct Event: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var due: Date
        var maybe: Date?
    }

    /// A table as earlier versions made it (dates as REAL seconds since 1970, the Double
    /// `timeIntervalSince1970`): its rows read as the nearest date, filters and orders on them
    /// agree with the dates read, and new writes keep working.
    @Test(arguments: [true, false])
    func datesWrittenAsSecondsSince1970StillReadAndFilter(strict: Bool) throws {
        let store = try Store(path: directory.path("legacy-\(strict).sqlite"))
        var random = SeededGenerator(seed: strict ? 7 : 8)
        let written = (0..<120).map { _ in Self.randomDate(&random) }.filter {
            $0.timeIntervalSinceReferenceDate.isFinite && abs($0.timeIntervalSince1970) < 1e11
        }
        try store.write { db in
            try db.execute("""
                CREATE TABLE events ("id" INTEGER PRIMARY KEY NOT NULL, "due" REAL NOT NULL, "maybe" REAL)\(strict ? " STRICT" : "")
                """)
            for (index, date) in written.enumerated() {
                try db.execute("INSERT INTO events VALUES (?, ?, NULL)", [index, SQLValue.real(date.timeIntervalSince1970)])
            }
        }
        let events = try store.collection("events", of: Event.self)
        let read = try events.order(by: Column("id")).fetchAll()
        #expect(read.map(\.due) == written.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970) })

        // New rows in the old table: the REAL column converts each to a REAL of seconds since
        // 1970, one of the two Doubles around the exact value (SQLite's text-to-REAL conversion
        // rounds a value halfway between them either way); the table keeps one form.
        let added = [Date(timeIntervalSinceReferenceDate: 770_000_000 + 0x1p-23), Date(), .distantPast]
        try events.insert(contentsOf: added.enumerated().map { Event(id: 1_000 + $0, due: $1, maybe: $1) })
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM events WHERE typeof(due) <> 'real'", as: Int.self) } == 0)
        let all = try events.order(by: Column("id")).fetchAll()
        for (event, date) in zip(all.suffix(added.count), added) {
            let seconds = date.timeIntervalSince1970
            #expect([seconds.nextDown, seconds, seconds.nextUp].map(Date.init(timeIntervalSince1970:)).contains(event.due),
                    "wrote \(date.timeIntervalSinceReferenceDate), read \(event.due.timeIntervalSinceReferenceDate)")
            // The date as written finds its row (and the rows that read as the same date).
            #expect(try events.filter(Column("due") == date).fetchAll().map(\.id).sorted()
                        == all.filter { $0.due == event.due }.map(\.id))
        }
        // Filters and order agree with the dates as read.
        #expect(try events.order(by: Column("due"), Column("id")).fetchAll().map(\.id)
                    == all.sorted { ($0.due, $0.id) < ($1.due, $1.id) }.map(\.id))
        for probe in all.prefix(30).map(\.due) {
            #expect(try events.filter(Column("due") == probe).fetchAll().map(\.id).sorted()
                        == all.filter { $0.due == probe }.map(\.id), "== \(probe.timeIntervalSince1970)")
            #expect(try events.filter(Column("due") < probe).fetchAll().map(\.id).sorted()
                        == all.filter { $0.due < probe }.map(\.id), "< \(probe.timeIntervalSince1970)")
        }
    }

    /// The recipe of the "Stored values" article: an old REAL date column rebuilt as `ANY`, its
    /// records rewritten, holds exact dates, ordered.
    @Test func anOldDateColumnRebuiltAsAnyHoldsExactDates() throws {
        let store = try Store(path: directory.path("rebuilt.sqlite"))
        try store.write { db in
            try db.execute(#"CREATE TABLE events ("id" INTEGER PRIMARY KEY NOT NULL, "due" REAL NOT NULL, "maybe" REAL) STRICT"#)
            for (index, seconds) in [1_700_000_000.25, -5.5, 0, 1_748_307_200].enumerated() {
                try db.execute("INSERT INTO events VALUES (?, ?, NULL)", [index, seconds])
            }
        }
        let events = try store.collection("events", of: Event.self)
        let before = try events.order(by: Column("id")).fetchAll()
        try store.write { db in
            try db.execute("ALTER TABLE events RENAME COLUMN due TO due_before")
            try db.execute("ALTER TABLE events ADD COLUMN due ANY NOT NULL DEFAULT 0")
            try db.execute("UPDATE events SET due = due_before")
            try db.execute("ALTER TABLE events DROP COLUMN due_before")
            for event in try events.fetchAll(in: db) { try events.update(event, in: db) }
        }
        let reopened = try store.collection("events", of: Event.self)
        #expect(try reopened.order(by: Column("id")).fetchAll() == before)
        let exact = Date(timeIntervalSinceReferenceDate: 770_000_000 + 0x1p-23)
        try reopened.insert(contentsOf: [Event(id: 10, due: exact, maybe: nil), Event(id: 11, due: exact.addingTimeInterval(0x1p-23), maybe: nil)])
        #expect(try reopened.fetch(id: 10)?.due == exact)
        #expect(try reopened.order(by: Column("due")).fetchAll().map(\.id) == [1, 2, 0, 3, 10, 11])
        #expect(try reopened.filter(Column("due") > exact).fetchAll().map(\.id) == [11])
    }

    // MARK: Filters and order agree with Swift

    struct Sample: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var date: Date
        var int64: Int64
        var double: Double
        var text: String
        var uuid: UUID
    }

    /// On seeded random values drawn from small pools (ties, neighbours one Double apart), every
    /// comparison filter and both orders on each column give the records Swift's `==` and `<` give.
    /// Text compares by Unicode scalars (SQLite compares UTF-8 bytes, which order as scalars do):
    /// that is Swift's order for text in normalization form C, and the filter test below checks
    /// both.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func filtersAndOrdersAgreeWithSwift(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let store = try Store(path: directory.path("filters-\(seed).sqlite"))
        let samples = try store.collection("samples", of: Sample.self)
        let dates = (0..<30).flatMap { _ -> [Date] in
            let date = Self.randomDate(&random)
            let interval = date.timeIntervalSinceReferenceDate
            return interval.isFinite ? [date, Date(timeIntervalSinceReferenceDate: interval.nextUp)] : [date]
        }
        let integers = (0..<30).map { _ in Self.randomInteger(&random) as Int64 }
        let doubles = (0..<30).map { _ in Self.randomDouble(&random) }
        let texts = (0..<30).map { _ in Self.randomText(&random) }
        let uuids = (0..<30).map { _ in Self.randomUUID(&random) }
        let records = (0..<150).map { id in
            Sample(id: id, date: dates.randomElement(using: &random)!, int64: integers.randomElement(using: &random)!,
                   double: doubles.randomElement(using: &random)!, text: texts.randomElement(using: &random)!,
                   uuid: uuids.randomElement(using: &random)!)
        }
        try samples.insert(contentsOf: records)

        try expectAgreement(samples, records, "date", \.date, probes: dates, equal: ==, less: <)
        try expectAgreement(samples, records, "int64", \.int64, probes: integers, equal: ==, less: <)
        try expectAgreement(samples, records, "double", \.double, probes: doubles, equal: ==, less: <)
        try expectAgreement(samples, records, "text", \.text, probes: texts,
                            equal: { $0.unicodeScalars.elementsEqual($1.unicodeScalars) },
                            less: { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) })
        try expectAgreement(samples, records, "uuid", \.uuid, probes: uuids, equal: ==, less: Self.uuidPrecedes)
    }

    /// UUIDs order by their 16 bytes (their upper-case text orders the same way).
    static func uuidPrecedes(_ a: UUID, _ b: UUID) -> Bool {
        withUnsafeBytes(of: a.uuid) { a in withUnsafeBytes(of: b.uuid) { b in a.lexicographicallyPrecedes(b) } }
    }

    func expectAgreement<Value: SQLValueConvertible>(
        _ collection: RecordCollection<Sample>, _ records: [Sample], _ name: String, _ key: KeyPath<Sample, Value>,
        probes: [Value], equal: (Value, Value) -> Bool, less: (Value, Value) -> Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let column = Column(name)
        func ids(_ filter: Filter) throws -> [Int] { try collection.filter(filter).fetchAll().map(\.id).sorted() }
        func model(_ predicate: (Value) -> Bool) -> [Int] { records.filter { predicate($0[keyPath: key]) }.map(\.id) }
        for probe in probes {
            // A date's own Double: its description shows whole seconds only.
            let label = "\(name) " + ((probe as? Date).map { "\($0.timeIntervalSinceReferenceDate)" } ?? String(reflecting: probe))
            #expect(try ids(column == probe) == model { equal($0, probe) }, "== \(label)", sourceLocation: sourceLocation)
            #expect(try ids(column != probe) == model { !equal($0, probe) }, "!= \(label)", sourceLocation: sourceLocation)
            #expect(try ids(column < probe) == model { less($0, probe) }, "< \(label)", sourceLocation: sourceLocation)
            #expect(try ids(column <= probe) == model { !less(probe, $0) }, "<= \(label)", sourceLocation: sourceLocation)
            #expect(try ids(column > probe) == model { less(probe, $0) }, "> \(label)", sourceLocation: sourceLocation)
            #expect(try ids(column >= probe) == model { !less($0, probe) }, ">= \(label)", sourceLocation: sourceLocation)
        }
        let ascending = records.sorted { less($0[keyPath: key], $1[keyPath: key]) || (!less($1[keyPath: key], $0[keyPath: key]) && $0.id < $1.id) }
        #expect(try collection.order(by: column).fetchAll().map(\.id) == ascending.map(\.id), "order by \(name)",
                sourceLocation: sourceLocation)
        let descending = records.sorted { less($1[keyPath: key], $0[keyPath: key]) || (!less($0[keyPath: key], $1[keyPath: key]) && $0.id < $1.id) }
        #expect(try collection.order(by: column.descending).fetchAll().map(\.id) == descending.map(\.id),
                "order by \(name) descending", sourceLocation: sourceLocation)
    }

    /// For text in normalization form C, the scalar order filters use is Swift's own `<` and `==`.
    @Test func scalarOrderIsSwiftsOrderForNormalizedText() {
        var random = SeededGenerator(seed: 99)
        for _ in 0..<2_000 {
            let a = Self.randomText(&random).precomposedStringWithCanonicalMapping
            let b = Self.randomText(&random).precomposedStringWithCanonicalMapping
            #expect((a < b) == a.unicodeScalars.lexicographicallyPrecedes(b.unicodeScalars), "\(a.debugDescription) < \(b.debugDescription)")
            #expect((a == b) == a.unicodeScalars.elementsEqual(b.unicodeScalars), "\(a.debugDescription) == \(b.debugDescription)")
        }
    }
}

/// Compact JSON written straight into bytes: the server encodes each changeset and result once
/// and splices the bytes into every socket's frame, so encoding must be cheap and its pieces
/// must concatenate. (Foundation's encoder allocates a tree per value and cannot splice.)
package struct JSONBytes {
    package private(set) var bytes: [UInt8] = []

    package init(reservingCapacity capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    /// Appends JSON text as it is (a piece written by this type, or a literal).
    package mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }
    package mutating func raw(_ piece: [UInt8]) { bytes.append(contentsOf: piece) }

    package mutating func integer(_ value: Int64) { bytes.append(contentsOf: String(value).utf8) }

    /// A finite number in its shortest form that reads back the same; ±Infinity and NaN, which
    /// JSON cannot spell, as the strings Postgres prints for them.
    package mutating func real(_ value: Double) {
        if value.isFinite {
            bytes.append(contentsOf: value.description.utf8)
        } else {
            string(value.isNaN ? "NaN" : value > 0 ? "Infinity" : "-Infinity")
        }
    }

    /// A JSON string: `"`, `\` and control characters escaped, everything else as UTF-8.
    package mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let digits = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array(#"\u00"#.utf8))
                bytes.append(digits[Int(byte >> 4)])
                bytes.append(digits[Int(byte & 15)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `string` as a JSON string (quotes and escapes), for messages that quote what a client sent.
    package static func quoted(_ string: String) -> String {
        var json = JSONBytes(reservingCapacity: string.utf8.count + 2)
        json.string(string)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    package mutating func value(_ value: WireValue) {
        switch value {
        case .null: raw("null")
        case .bool(let bool): raw(bool ? "true" : "false")
        case .integer(let integer): self.integer(integer)
        case .real(let real): self.real(real)
        case .text(let text): string(text)
        }
    }

    package mutating func row(_ row: [WireValue]) { array(row) { $0.value($1) } }

    package mutating func strings(_ list: [String]) { array(list) { $0.string($1) } }

    package mutating func integers(_ list: [Int]) { array(list) { $0.integer(Int64($1)) } }

    /// A JSON array of `items`, each written by `write`.
    private mutating func array<Item>(_ items: [Item], _ write: (inout JSONBytes, Item) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (offset, item) in items.enumerated() {
            if offset > 0 { bytes.append(UInt8(ascii: ",")) }
            write(&self, item)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A result's members: `"columns":…,"types":…,"key":…,"rows":[…]`.
    private mutating func result(columns: [String], types: [String], key: [Int], rows: [[WireValue]]) {
        raw(#""columns":"#); strings(columns)
        raw(#","types":"#); strings(types)
        raw(#","key":"#); integers(key)
        raw(#","rows":["#)
        for (offset, item) in rows.enumerated() {
            if offset > 0 { bytes.append(UInt8(ascii: ",")) }
            row(item)
        }
        raw("]")
    }

    /// A ``WireSnapshot`` as its JSON object.
    package mutating func snapshot(_ snapshot: WireSnapshot) {
        raw(#"{"basis":"#); string(snapshot.basis)
        raw(","); result(columns: snapshot.columns, types: snapshot.types, key: snapshot.key, rows: snapshot.rows)
        if let included = snapshot.included, !included.isEmpty {
            raw(#","included":{"#)
            for (offset, (path, part)) in included.sorted(by: { $0.key < $1.key }).enumerated() {
                if offset > 0 { raw(",") }
                string(path); raw(":"); includedSnapshot(part)
            }
            raw("}")
        }
        raw("}")
    }

    /// A ``WireIncludedSnapshot`` as its JSON object.
    package mutating func includedSnapshot(_ snapshot: WireIncludedSnapshot) {
        raw("{"); result(columns: snapshot.columns, types: snapshot.types, key: snapshot.key, rows: snapshot.rows)
        if let counts = snapshot.counts { raw(#","counts":"#); integers(counts) }
        raw("}")
    }

    /// Columns by position, `{"0": 7, "2": "x"}`, in position order.
    private mutating func columns(_ columns: [Int: WireValue]) {
        raw("{")
        for (index, (column, value)) in columns.sorted(by: { $0.key < $1.key }).enumerated() {
            if index > 0 { raw(",") }
            string(String(column)); raw(":"); self.value(value)
        }
        raw("}")
    }

    private mutating func path(_ path: WirePath) {
        raw("["); integer(Int64(path.section)); raw(","); integer(Int64(path.item)); raw("]")
    }

    /// A ``WireIncludedChange`` as its JSON object, its empty lists left out.
    package mutating func includedChange(_ change: WireIncludedChange) {
        var separator = "{"
        func key(_ name: String) {
            raw(separator + "\"" + name + "\":")
            separator = ","
        }
        switch change {
        case .keyed(let keyed):
            if !keyed.puts.isEmpty {
                key("put")
                array(keyed.puts) { out, put in out.columns(put) }
            }
            if !keyed.deletes.isEmpty {
                key("delete")
                array(keyed.deletes) { out, identity in out.row(identity) }
            }
        case .sectioned(let sectioned):
            if !sectioned.deletes.isEmpty {
                key("deletes")
                array(sectioned.deletes) { out, path in out.path(path) }
            }
            if !sectioned.inserts.isEmpty {
                key("inserts")
                array(sectioned.inserts) { out, insert in
                    out.raw("["); out.integer(Int64(insert.path.section)); out.raw(","); out.integer(Int64(insert.path.item))
                    out.raw(","); out.row(insert.row); out.raw("]")
                }
            }
            if !sectioned.moves.isEmpty {
                key("moves")
                array(sectioned.moves) { out, move in
                    out.raw("["); out.path(move.old); out.raw(","); out.path(move.new); out.raw("]")
                }
            }
            if !sectioned.updates.isEmpty {
                key("updates")
                array(sectioned.updates) { out, update in
                    out.raw("["); out.path(update.old); out.raw(","); out.path(update.new); out.raw(","); out.columns(update.columns); out.raw("]")
                }
            }
        }
        raw(separator == "{" ? "{}" : "}")
    }

    /// A ``WireChangeset`` as its JSON object, its empty lists left out (the form its `Codable`
    /// conformance reads and writes).
    package mutating func changeset(_ changeset: WireChangeset) {
        var separator = "{"
        func key(_ name: String) {
            raw(separator + "\"" + name + "\":")
            separator = ","
        }
        if !changeset.deletes.isEmpty {
            key("deletes")
            integers(changeset.deletes)
        }
        if !changeset.inserts.isEmpty {
            key("inserts")
            array(changeset.inserts) { out, insert in
                out.raw("["); out.integer(Int64(insert.index)); out.raw(","); out.row(insert.row); out.raw("]")
            }
        }
        if !changeset.moves.isEmpty {
            key("moves")
            array(changeset.moves) { out, move in
                out.raw("["); out.integer(Int64(move.old)); out.raw(","); out.integer(Int64(move.new)); out.raw("]")
            }
        }
        if !changeset.updates.isEmpty {
            key("updates")
            array(changeset.updates) { out, update in
                out.raw("["); out.integer(Int64(update.old)); out.raw(","); out.integer(Int64(update.new)); out.raw(",{")
                for (index, (column, value)) in update.columns.sorted(by: { $0.key < $1.key }).enumerated() {
                    if index > 0 { out.raw(",") }
                    out.string(String(column)); out.raw(":"); out.value(value)
                }
                out.raw("}]")
            }
        }
        if let included = changeset.included, !included.isEmpty {
            key("included")
            raw("{")
            for (offset, (path, change)) in included.sorted(by: { $0.key < $1.key }).enumerated() {
                if offset > 0 { raw(",") }
                string(path); raw(":"); includedChange(change)
            }
            raw("}")
        }
        raw(separator == "{" ? "{}" : "}")
    }
}

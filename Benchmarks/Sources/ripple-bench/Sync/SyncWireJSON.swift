import RippleSync

/// The server's frame format, written by the benchmark (the server's own writer is internal to
/// its package): the same compact JSON, keys in the same order, so that a frame the server never
/// sends — a changeset carrying the full row, a whole window after a change — is counted in the
/// bytes it would take. Checked against frames the server did send (S1).
enum SyncWireJSON {
    /// A `changes` frame carrying one subscription's changeset.
    static func changesFrame(lsn: String, id: String, _ changeset: WireChangeset) -> String {
        #"{"type":"changes","lsn":"# + string(lsn) + #","changesets":{"# + string(id) + ":" + changesetObject(changeset) + "}}"
    }

    /// A `changes` frame carrying one subscription's whole result.
    static func snapshotFrame(lsn: String, id: String, _ snapshot: WireSnapshot) -> String {
        #"{"type":"changes","lsn":"# + string(lsn) + #","snapshots":{"# + string(id) + ":" + snapshotObject(snapshot) + "}}"
    }

    static func snapshotObject(_ snapshot: WireSnapshot) -> String {
        var out = #"{"basis":"# + string(snapshot.basis)
        out += #","columns":"# + list(snapshot.columns.map(string))
        out += #","types":"# + list(snapshot.types.map(string))
        out += #","key":"# + list(snapshot.key.map(String.init))
        out += #","rows":"# + list(snapshot.rows.map(row)) + "}"
        return out
    }

    /// A changeset as the server writes it: its empty lists left out.
    static func changesetObject(_ changeset: WireChangeset) -> String {
        var members: [String] = []
        if !changeset.deletes.isEmpty { members.append(#""deletes":"# + list(changeset.deletes.map(String.init))) }
        if !changeset.inserts.isEmpty {
            members.append(#""inserts":"# + list(changeset.inserts.map { "[\($0.index)," + row($0.row) + "]" }))
        }
        if !changeset.moves.isEmpty { members.append(#""moves":"# + list(changeset.moves.map { "[\($0.old),\($0.new)]" })) }
        if !changeset.updates.isEmpty {
            members.append(#""updates":"# + list(changeset.updates.map { update in
                let columns = update.columns.sorted { $0.key < $1.key }.map { string(String($0.key)) + ":" + value($0.value) }
                return "[\(update.old),\(update.new),{" + columns.joined(separator: ",") + "}]"
            }))
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    static func row(_ values: [WireValue]) -> String { list(values.map(value)) }

    static func value(_ value: WireValue) -> String {
        switch value {
        case .null: "null"
        case .bool(let bool): bool ? "true" : "false"
        case .integer(let integer): String(integer)
        case .real(let real) where real.isFinite: real.description
        case .real(let real): string(real.isNaN ? "NaN" : real > 0 ? "Infinity" : "-Infinity")
        case .text(let text): string(text)
        }
    }

    /// A JSON string: `"`, `\` and control characters escaped, everything else as it is.
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let digits = Array("0123456789abcdef")
                out += "\\u00" + String(digits[Int(scalar.value >> 4)]) + String(digits[Int(scalar.value & 15)])
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func list(_ items: [String]) -> String { "[" + items.joined(separator: ",") + "]" }
}

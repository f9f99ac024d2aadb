#if Sync
import Foundation

/// The live-list web page a node serves at `/`: plain HTML and JavaScript (`live-list.html`,
/// `live-list.js` beside this file), compiled into the binary.
///
/// The page signs in with a token, subscribes to one query of a synced table over `/sync`, and
/// applies each changeset to the DOM (rows removed, inserted and moved as nodes, changed cells
/// rewritten and highlighted). It reconnects and resumes by itself. `GET /tables` tells it the
/// synced tables and their columns. A fragment that names users with their tokens
/// (`#as=alice:v1.…&as=bob:v1.…`, as the demo prints) adds a user switch: the same query, shown
/// as each user in turn.
enum LiveListPage {
    static let html = PackageResources.live_list_html
    static let script = PackageResources.live_list_js

    /// `GET /tables`: `{"tables": [{"name": …, "columns": [names in table order]}, …]}`, the
    /// synced tables the replica holds now, by name.
    static func tablesJSON(_ schemas: [SyncedTableSchema]) -> String {
        struct Table: Encodable { var name: String; var columns: [String] }
        struct Tables: Encodable { var tables: [Table] }
        let tables = Tables(tables: schemas.sorted { $0.name < $1.name }.map { Table(name: $0.name, columns: $0.columns.map(\.name)) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? String(decoding: encoder.encode(tables), as: UTF8.self)) ?? #"{"tables":[]}"#
    }
}
#endif

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
///
/// When the node syncs `projects` and `todos` (as the demo's team schema does), the page shows
/// a sectioned list beside the flat one, on the same socket: one subscription whose root is
/// `projects` (by id) with a to-many include `todos` (by rank) and, when `users` is synced, a
/// to-one `owner` — a section per project (its name, its owner's name, its number of todos) and
/// its todos. Each frame moves the sections by the root's changeset and the todos by their
/// sectioned change: a todo moved to another project is its element moved from one section's
/// list to the other's, and a revoked membership removes its section with the todos in it.
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

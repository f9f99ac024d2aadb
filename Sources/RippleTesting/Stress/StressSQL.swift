import Ripple

/// Performs operations with raw SQL (`db.execute(sql, arguments)`), every value bound. Text that
/// is not valid UTF-8 cannot be a Swift `String`: it is bound as a blob under `CAST(? AS TEXT)`,
/// which stores its bytes as text.
enum StressSQL {
    /// The SQL standing for `value` and the argument it binds.
    static func bound(_ value: StressValue) -> (sql: String, argument: SQLValue) {
        if case .text(let bytes) = value, value.sqlValue == nil { return ("CAST(? AS TEXT)", .blob(bytes)) }
        return ("?", value.sqlValue ?? .null)
    }

    /// Runs `operation` in `db`'s transaction; returns the rows it changed (`db.changedRowCount`).
    static func execute(_ operation: StressOperation, in db: Database) throws -> Int {
        let table = operation.table
        let quotedTable = "\"\(table.name)\""
        func name(_ column: Int) -> String { "\"\(table.columns[column].name)\"" }
        var arguments: [SQLValue] = []
        func bind(_ value: StressValue) -> String {
            let (sql, argument) = bound(value)
            arguments.append(argument)
            return sql
        }
        func keyCondition(_ key: [StressValue]) -> String {
            zip(table.keyColumns, key).map { "\(name($0)) = \(bind($1))" }.joined(separator: " AND ")
        }
        let sql: String
        switch operation {
        case .insert(_, let row), .upsert(_, let row):
            let columns = table.columns.indices.map(name).joined(separator: ", ")
            let values = row.values.map(bind).joined(separator: ", ")
            let conflict = table.keyColumns.map(name).joined(separator: ", ")
            if case .insert = operation {
                sql = "INSERT INTO \(quotedTable) (\(columns)) VALUES (\(values)) ON CONFLICT (\(conflict)) DO NOTHING"
            } else {
                sql = "INSERT INTO \(quotedTable) (\(columns)) VALUES (\(values)) ON CONFLICT (\(conflict)) DO UPDATE SET "
                    + table.valueColumns.map { "\(name($0)) = excluded.\(name($0))" }.joined(separator: ", ")
            }
        case .update(_, let row):
            let assignments = table.valueColumns.map { "\(name($0)) = \(bind(row.values[$0]))" }.joined(separator: ", ")
            sql = "UPDATE \(quotedTable) SET \(assignments) WHERE \(keyCondition(row.key(in: table)))"
        case .delete(_, let key):
            sql = "DELETE FROM \(quotedTable) WHERE \(keyCondition(key))"
        case .updateWhere(_, let column, let value, let predicate):
            var text = "UPDATE \(quotedTable) SET \(name(column)) = \(bind(value))"
            if let predicate { text += " WHERE " + predicate.sql(for: table, arguments: &arguments) }
            sql = text
        case .deleteWhere(_, let predicate):
            sql = "DELETE FROM \(quotedTable) WHERE " + predicate.sql(for: table, arguments: &arguments)
        case .insertAll, .upsertAll, .updateAll, .deleteAll:
            throw StressError("\(operation.description) is only performed through a collection")
        }
        try db.execute(sql, arguments)
        return db.changedRowCount
    }
}

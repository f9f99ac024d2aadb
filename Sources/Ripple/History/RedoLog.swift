import RippleSQLite

/// What undoing versions did to history's copy of a table, recorded as it happens by temporary
/// triggers on the copy, so that the copy can go forward again, version by version, oldest first.
///
/// History rewinds the copy from the newest version back to the start of its range (the change
/// log's before-images only go backwards). While it does, every row an undo inserts, deletes or
/// updates is recorded here with all its values and its rowid. Redoing a version replays its
/// records backwards, each reversed: a row the undo inserted is deleted, a row it deleted is
/// inserted again with its rowid, an update is turned back. The copy is then exactly as it was
/// before the undo, rowids included. Nothing here depends on how the change log stores
/// before-images: whatever an undo did to the copy is what is reversed.
///
/// The records live in a temporary table of the connection (SQLite's temporary storage), not in
/// Swift memory: per version, this keeps where its records end.
struct RedoLog {
    /// The rows a redo changed: how many records it replayed, and the values of the key column
    /// (when asked for; `nil` otherwise) of every row it touched, exactly as stored.
    struct Changes {
        var count = 0
        var keys: Set<RowKey>?
    }

    private let db: Database
    private let shape: TableShape
    /// The records' range of each version undone while recording: `(start, end]` in `seq`.
    private var ranges: [Int64: (start: Int64, end: Int64)] = [:]
    private var end: Int64 = 0
    private var recording = true
    private var open = true
    /// `PRAGMA recursive_triggers` before recording turned it on.
    private var recursiveTriggers = false

    /// The records' table, and the triggers that fill it.
    private let table: String
    private let triggers: [String]

    /// Starts recording what happens to the copy of `shape`'s table (in `temp`, under its name).
    /// `slot` tells apart the logs of the tables one history rewinds together (0 for the first):
    /// each has its records' table and triggers.
    init(_ db: Database, shape: TableShape, slot: Int = 0) throws {
        self.db = db
        self.shape = shape
        let table = slot == 0 ? "ripple_history_redo" : "ripple_history_redo_\(slot)"
        self.table = table
        triggers = ["insert", "delete", "update"].map { "\(table)_\($0)" }
        let values = shape.columns.indices.map { "c\($0)" }
        try db.execute("DROP TABLE IF EXISTS temp.\(table)")
        // Columns without a type keep every value as it is stored in the copy.
        try db.execute("CREATE TEMP TABLE \(table) (seq INTEGER PRIMARY KEY, op INTEGER NOT NULL, r, "
                       + values.joined(separator: ", ") + ")")
        do {
            // So that rows a REPLACE deletes to make room fire the delete trigger too.
            recursiveTriggers = try db.fetchValue("PRAGMA recursive_triggers", as: Int.self) == 1
            try db.execute("PRAGMA recursive_triggers = ON")
            let list = "op, r, " + values.joined(separator: ", ")
            func row(_ op: Int, _ image: String) -> String {
                let rowid = shape.rowid.map { "\(image).\($0)" } ?? "NULL"
                return "INSERT INTO \(table) (\(list)) VALUES (\(op), \(rowid), "
                    + shape.columns.map { "\(image).\(SQLIdentifier.quoted($0))" }.joined(separator: ", ") + ");"
            }
            // op 1: the undo inserted this row (redo deletes it); op 0: the undo deleted it
            // (redo inserts it). An update records both, old image first.
            let on = "ON \(shape.quotedTable) BEGIN "
            try db.execute("CREATE TEMP TRIGGER \(triggers[0]) AFTER INSERT \(on)\(row(1, "NEW")) END")
            try db.execute("CREATE TEMP TRIGGER \(triggers[1]) AFTER DELETE \(on)\(row(0, "OLD")) END")
            try db.execute("CREATE TEMP TRIGGER \(triggers[2]) AFTER UPDATE \(on)\(row(0, "OLD")) \(row(1, "NEW")) END")
        } catch {
            close()
            throw error
        }
    }

    /// Runs `undo`, which undoes `version` on the copy, and keeps what it did.
    mutating func record(_ version: Int64, _ undo: () throws -> Void) throws {
        precondition(recording, "RedoLog.record(_:_:) after stopRecording()")
        try undo()
        let start = end
        end = try db.fetchValue("SELECT max(seq) FROM temp.\(table)", as: Int64.self) ?? 0
        ranges[version] = (start, end)
    }

    /// Stops recording (before redoing: redoing must not record itself).
    mutating func stopRecording() throws {
        guard recording else { return }
        recording = false
        for trigger in triggers { try db.execute("DROP TRIGGER IF EXISTS temp.\(trigger)") }
        if !recursiveTriggers { try db.execute("PRAGMA recursive_triggers = OFF") }
    }

    /// Redoes `version` on the copy (undone while recording; versions are redone oldest first,
    /// each once). Returns the changes, with the values of column `keyColumn` of the copy.
    ///
    /// - Complexity: O(r log n) for r records in a copy of n rows.
    func redo(_ version: Int64, keyColumn: Int?) throws -> Changes {
        precondition(!recording, "RedoLog.redo(_:keyColumn:) while recording")
        var changes = Changes(keys: keyColumn == nil ? nil : [])
        guard let range = ranges[version], range.end > range.start else { return changes }
        let key = keyColumn.map { "c\($0)" } ?? "NULL"
        let read = try db.cachedStatement("SELECT seq, op, \(key) FROM temp.\(table) WHERE seq > ? AND seq <= ? ORDER BY seq DESC")
        defer { read.reset() }
        try read.bind([range.start, range.end])
        var records: [(seq: Int64, inserted: Bool)] = []
        while try read.step() {
            records.append((read.integer(at: 0), read.integer(at: 1) == 1))
            if keyColumn != nil { changes.keys?.insert(RowKey(column: 2, of: read.handle)) }
        }
        read.reset()
        let delete = try db.cachedStatement(deleteSQL)
        let insert = try db.cachedStatement(insertSQL)
        for record in records {
            let statement = record.inserted ? delete : insert
            defer { statement.reset() }
            try statement.bindInteger(record.seq, at: 1)
            _ = try statement.step()
        }
        changes.count = records.count
        return changes
    }

    /// Deletes from the copy the row of record `?1` (by rowid, or by key without one).
    private var deleteSQL: String {
        let condition: String
        if let rowid = shape.rowid {
            condition = "\(rowid) = (SELECT r FROM temp.\(table) WHERE seq = ?1)"
        } else {
            // No rowid to name (WITHOUT ROWID, or hidden by columns): the declared key.
            let key = shape.keyColumns ?? []
            let columns = key.map(SQLIdentifier.quoted).joined(separator: ", ")
            let values = key.compactMap { shape.columns.firstIndex(of: $0) }.map { "c\($0)" }.joined(separator: ", ")
            condition = "(\(columns)) IS (SELECT \(values) FROM temp.\(table) WHERE seq = ?1)"
        }
        return "DELETE FROM temp.\(shape.quotedTable) WHERE \(condition)"
    }

    /// Inserts into the copy the row of record `?1`, with its rowid when the copy keeps them.
    private var insertSQL: String {
        let rowid = shape.separateRowid.map { ("\($0), ", "r, ") } ?? ("", "")
        return "INSERT INTO temp.\(shape.quotedTable) (\(rowid.0)\(shape.columns.map(SQLIdentifier.quoted).joined(separator: ", "))) "
            + "SELECT \(rowid.1)\(shape.columns.indices.map { "c\($0)" }.joined(separator: ", ")) FROM temp.\(table) WHERE seq = ?1"
    }

    /// Drops the triggers and the records.
    mutating func close() {
        guard open else { return }
        open = false
        for trigger in triggers { try? db.execute("DROP TRIGGER IF EXISTS temp.\(trigger)") }
        if !recursiveTriggers { try? db.execute("PRAGMA recursive_triggers = OFF") }
        try? db.execute("DROP TABLE IF EXISTS temp.\(table)")
    }
}

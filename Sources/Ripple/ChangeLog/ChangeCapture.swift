import Foundation
import RippleSQLite

/// Captures every row change made on the writer connection — through collections or raw SQL —
/// with SQLite's pre-update hook, so that a write transaction can log them before it commits.
///
/// Per change it keeps the table, the operation and the row's primary key, exactly as SQLite
/// stores it (a ``RowKey``: type and bytes per key column; the rowid for tables keyed by it).
/// What it needs of each table — its key, by SQLite's rules, and how the hook numbers its
/// columns — is read from SQLite's answers (``TableLayout``, ``PreupdateColumns``) before the
/// transaction's statements run, and again when the schema changes; a change to a table created
/// in the same transaction keeps the whole row until the key columns are known.
///
/// A virtual table's module writes its rows to shadow tables: a change to a shadow table is
/// kept as a change of unknown extent to its virtual table (``changedVirtualTables``).
///
/// Tables whose names start with `ripple_` or `sqlite_`, and tables outside `main`, are not logged.
///
/// For time travel it also keeps a before-image of each updated or deleted row (see
/// ``BeforeImage``): for an update that keeps the key, the old values of the columns it changed
/// (old and new values compared by type and bytes); for a delete, or an update that changes the
/// key, the whole row.
///
/// The hook runs once per changed row, so it allocates nothing per row: the keys' encodings go
/// one after the other into one buffer (text copied from SQLite's value), the before-images into
/// another, and each change is a fixed-size entry naming its (table, operation) group and where
/// its key ends. Lists are only made when the log is written: ``groups(keepingKeys:)`` builds
/// one list of exact keys and one list of before-images per group; ``changes`` hands changes out
/// one by one.
final class ChangeCapture {
    enum Operation: String, Sendable {
        case insert, update, delete
    }

    /// One captured change, as ``changes`` hands it out.
    struct Change: Equatable {
        var table: String
        var operation: Operation
        /// The key exactly as stored.
        var rowKey: RowKey
        /// The key as the change log's text writes it.
        var key: String { rowKey.text }
    }

    /// The changes of one table by one operation, as the change log stores them.
    struct Group: Equatable {
        var table: String
        var operation: Operation
        /// How many rows changed.
        var count: Int
        /// The rows' keys exactly, in the order the rows changed, as a list of ``RowKey``
        /// encodings (see ``RowKey/list(_:)``).
        var keys: [UInt8]
        /// For updates and deletes, the rows' before-images, a list parallel to the keys (see
        /// ``BeforeImage``): `nil` for inserts, and when a change kept none (a table created in
        /// the transaction) or the transaction kept none at all.
        var beforeImages: [UInt8]? = nil
        /// The keys, when asked for (see ``ChangeCapture/groups(keepingKeys:)``).
        var rowKeys: [RowKey] = []
    }

    /// A captured change: its group (an index in `groupNames`) and where its key ends in
    /// `keyBytes` (it starts where the previous entry's key ends).
    struct Entry {
        var keyEnd: Int
        var group: Int
    }

    /// Column numbers for the pre-update hook, one list per kind of value (see
    /// ``PreupdateColumns``): the same columns, as `sqlite3_preupdate_new`/`_old` number them.
    struct Numbered {
        var insertNew: [Int32] = []
        var updateOld: [Int32] = []
        var updateNew: [Int32] = []
        var deleteOld: [Int32] = []
    }

    /// How to find a table's key: the rowid, or these columns of the row.
    private enum KeyColumns {
        case rowid
        case columns(Numbered, withoutRowid: Bool)
    }

    /// What the hook needs to know of one table, from its ``TableLayout``.
    private struct TableCapture {
        var key: KeyColumns
        /// The key is one column that stores text as it is given (TEXT or BLOB affinity).
        var keyTakesText: Bool
        /// The columns a before-image holds (the table's writable columns, in order).
        var image: Numbered
        /// Per image column, its default when SQLite may report NULL for it in a row written
        /// before the column was added (see ``PreupdateColumns/addedColumnReadsNull``).
        var defaults: [SQLValue?]
        /// For a shadow table, the virtual table whose rows it holds: its changes are that
        /// table's, of unknown extent.
        var shadowOwner: String?
        /// The image position of the column that is the rowid's alias: its value is the rowid.
        var rowidImagePosition: Int?
        /// Whether the hook reads old rows whole (see
        /// ``PreupdateColumns/misreadsRowidAfterVirtualColumn``): if not, updates and deletes keep
        /// no before-image, and history says it cannot rewind them.
        var keepsImages = true
        /// How SQL reads a row back by its key (see ``statementKept(since:in:)``): the key's
        /// columns (the rowid's name for a table keyed by it), and the image's columns, quoted;
        /// `nil` when SQL cannot name the key.
        var keyNames: [String]?
        var imageNames: [String] = []
    }

    private struct PendingRow {
        var table: String
        var operation: Operation
        var rowid: Int64
        var values: [SQLValue]
    }

    /// A position to roll back to (a savepoint's start): how many changes, pending rows and
    /// changes of virtual tables were captured then.
    struct Mark {
        var changes: Int
        var pending: Int
        var virtual: Int
    }

    /// Where a statement began: the capture's ``mark`` and its count of ``statementWrites``.
    struct StatementStart {
        var mark: Mark
        var statementWrites: Int
    }

    /// The table of the previous change, and its groups in this transaction.
    private struct CurrentTable {
        var name = ""
        var logged = false
        /// `nil` for a table created in this transaction, whose key columns are not known yet.
        var capture: TableCapture?
        /// The key is one column that stores text as it is given (TEXT or BLOB affinity).
        var keyTakesText = false
        /// The group of each operation on the table (by ``Operation/index``), -1 until looked up.
        var groups: (Int, Int, Int) = (-1, -1, -1)
    }

    // The hook's state is only touched on the writer connection, under the writer's lock, and no
    // access overlaps another (the hook calls nothing that re-enters the capture): the dynamic
    // exclusivity checks would cost more than the hook's own work.
    @exclusivity(unchecked) private var entries: [Entry] = []
    @exclusivity(unchecked) private var keyBytes: [UInt8] = []
    /// Before-images of updated and deleted rows (see ``BeforeImage``), one after the other, and
    /// for each the change it belongs to (an index in `entries`) and where it ends in
    /// `imageBytes`. Inserts keep none, so they cost nothing more.
    @exclusivity(unchecked) private var imageBytes: [UInt8] = []
    @exclusivity(unchecked) private var images: [(entry: Int, end: Int)] = []
    @exclusivity(unchecked) private var groupNames: [(table: String, operation: Operation)] = []
    @exclusivity(unchecked) private var table = CurrentTable()
    /// A copy of the current table's name (SQLite's pointer may not outlive a schema change).
    @exclusivity(unchecked) private var tableName: UnsafeMutablePointer<CChar>?
    /// The key (its encoding) a collection's insert bound for the row its statement inserts next
    /// (see ``expectInserts(into:)``), valid while `hasExpectedKey`.
    @exclusivity(unchecked) private var expectedKey: [UInt8] = []
    @exclusivity(unchecked) private var hasExpectedKey = false
    @exclusivity(unchecked) private var expectedTable: String?
    private var pending: [PendingRow] = []
    /// How many rows of logged tables statements inserted or updated themselves (not through a
    /// trigger, and not a row deleted by `REPLACE`): rows `sqlite3_changes` counts when their
    /// statement ends without SQLite undoing it. (Deletes are left out: the hook does not tell a
    /// `DELETE`'s rows from those `REPLACE` deletes, which SQLite does not count. Shadow tables are
    /// left out: a virtual table's module writes them with statements of its own, also at depth 0,
    /// in the middle of another statement — FTS5 flushes its pending rows when a statement begins.)
    @exclusivity(unchecked) private(set) var statementWrites = 0
    /// The virtual tables whose rows changed (their shadow tables did), in the order of their
    /// first change, repeats allowed.
    private var virtualChanges: [String] = []
    private var tables: [String: TableCapture] = [:]
    /// How this process's SQLite numbers columns in the hook.
    private let numbering = PreupdateColumns.learnt
    /// `PRAGMA schema_version` when the key columns were last read (current after ``refreshSchemaIfNeeded(_:)``).
    private(set) var schemaVersion: Int64 = -1
    /// Whether the database stores text as UTF-8 (the default; `PRAGMA encoding` can choose UTF-16).
    private var textIsUTF8 = true

    deinit { free(tableName) }

    /// Every change captured since the last ``reset()``, in the order the rows changed (changes to
    /// tables created in this transaction come last, after ``resolvePending(_:)``).
    var changes: ChangeList { ChangeList(entries: entries, keyBytes: keyBytes, groupNames: groupNames) }

    /// Whether any update or delete kept a before-image since the last ``reset()``.
    var hasBeforeImages: Bool { !images.isEmpty }

    /// How many changes were captured since the last ``reset()`` (rows of tables created in the
    /// transaction count once ``resolvePending(_:)`` ran).
    var changeCount: Int { entries.count }

    /// Whether any change was captured since the last ``reset()``.
    var isEmpty: Bool { entries.isEmpty && pending.isEmpty && virtualChanges.isEmpty }

    /// The virtual tables whose rows changed since the last ``reset()`` (which rows is not
    /// known: their modules keep them in shadow tables), each once, in the order of their first
    /// change.
    var changedVirtualTables: [String] {
        var seen: Set<String> = []
        return virtualChanges.filter { seen.insert($0).inserted }
    }

    /// A position to roll back to (a savepoint's start).
    var mark: Mark { Mark(changes: entries.count, pending: pending.count, virtual: virtualChanges.count) }

    /// Where a statement about to run begins (see ``Database/step(_:)``).
    var statementStart: StatementStart { StatementStart(mark: mark, statementWrites: statementWrites) }

    /// Whether anything was captured after `mark`.
    func hasChanges(since mark: Mark) -> Bool {
        entries.count > mark.changes || pending.count > mark.pending || virtualChanges.count > mark.virtual
    }

    /// Forgets changes captured after `mark` (their savepoint rolled back).
    func rollback(to mark: Mark) {
        virtualChanges.removeSubrange(min(mark.virtual, virtualChanges.count)...)
        if mark.changes < entries.count {
            entries.removeSubrange(mark.changes...)
            keyBytes.removeSubrange((entries.last?.keyEnd ?? 0)...)
            if let kept = images.lastIndex(where: { $0.entry < mark.changes }) {
                images.removeSubrange((kept + 1)...)
                imageBytes.removeSubrange(images[kept].end...)
            } else {
                images.removeAll()
                imageBytes.removeAll()
            }
        }
        pending.removeSubrange(min(mark.pending, pending.count)...)
    }

    /// Forgets every captured change (a new transaction starts, or one rolled back).
    func reset() {
        // Keep the buffers of ordinary transactions; give back those of a bulk import.
        entries.removeAll(keepingCapacity: entries.capacity <= 1 << 16)
        keyBytes.removeAll(keepingCapacity: keyBytes.capacity <= 1 << 20)
        images.removeAll(keepingCapacity: images.capacity <= 1 << 16)
        imageBytes.removeAll(keepingCapacity: imageBytes.capacity <= 1 << 20)
        groupNames.removeAll(keepingCapacity: true)
        table.groups = (-1, -1, -1)
        pending.removeAll()
        virtualChanges.removeAll()
    }

    /// The captured changes grouped as the change log stores them: one ``Group`` per table and
    /// operation that changed rows, in the order of each group's first change. `keepingKeys`: also
    /// hand out each group's keys as ``RowKey``s (for observers).
    ///
    /// Before-images go with the first change of each key in the transaction, as its image from
    /// before the transaction (see ``BeforeImage/appendMerged(_:of:to:)``); the key's later
    /// changes, and the changes of a key first inserted (it did not exist before), have none.
    ///
    /// - Complexity: O(n) in the keys' and images' total length: each key is copied from the
    ///   capture's buffer into the group's key list, without a string per key.
    func groups(keepingKeys: Bool = false) -> [Group] {
        guard !entries.isEmpty else { return [] }
        if entries.count == 1 { return [singleChange(keepingKeys: keepingKeys)] }
        var groups = groupNames.map { Group(table: $0.table, operation: $0.operation, count: 0, keys: []) }
        var sizes = [Int](repeating: 2, count: groupNames.count)
        var start = 0
        for entry in entries {
            groups[entry.group].count += 1
            sizes[entry.group] += entry.keyEnd - start + 3
            start = entry.keyEnd
        }
        let tracksImages = hasBeforeImages
        for index in groups.indices {
            groups[index].keys.reserveCapacity(sizes[index])
            if tracksImages && groups[index].operation != .insert { groups[index].beforeImages = [] }
        }

        // The first change of each key (by table): the images of its changes, or -1 when it was
        // an insert. Each update or delete takes a slot: the key's first change (an index in
        // `touched`), or -1.
        struct TableKey: Hashable {
            var table: String
            var key: RowKey
        }
        var firstChanges: [TableKey: Int] = [:]
        var touched: [[Range<Int>]] = []
        var slots = [[Int]](repeating: [], count: groups.count)
        var complete = [Bool](repeating: true, count: groups.count)
        var imageIndex = 0

        keyBytes.withUnsafeBufferPointer { keys in
            start = 0
            for (index, entry) in entries.enumerated() {
                let key = UnsafeBufferPointer(rebasing: keys[start..<entry.keyEnd])
                start = entry.keyEnd
                let group = entry.group
                RowKey.appendToList(key, to: &groups[group].keys)
                guard keepingKeys || tracksImages else { continue }
                let rowKey = RowKey(encoded: key)
                if keepingKeys { groups[group].rowKeys.append(rowKey) }
                guard tracksImages else { continue }

                while imageIndex < images.count && images[imageIndex].entry < index { imageIndex += 1 }
                var image: Range<Int>?
                if imageIndex < images.count && images[imageIndex].entry == index {
                    image = (imageIndex == 0 ? 0 : images[imageIndex - 1].end)..<images[imageIndex].end
                }
                let operation = groups[group].operation
                if operation != .insert && image == nil { complete[group] = false }
                let tableKey = TableKey(table: groups[group].table, key: rowKey)
                if let first = firstChanges[tableKey] {
                    if first >= 0, let image { touched[first].append(image) }
                    if operation != .insert { slots[group].append(-1) }
                } else if operation == .insert {
                    firstChanges[tableKey] = -1
                } else {
                    firstChanges[tableKey] = touched.count
                    slots[group].append(touched.count)
                    touched.append(image.map { [$0] } ?? [])
                }
            }
        }
        imageBytes.withUnsafeBufferPointer { bytes in
            for index in groups.indices where groups[index].beforeImages != nil {
                guard complete[index] else {
                    groups[index].beforeImages = nil
                    continue
                }
                var list: [UInt8] = []
                for slot in slots[index] {
                    if slot < 0 {
                        list.append(0)   // a length of 0: no image
                    } else if !BeforeImage.appendMerged(touched[slot], of: bytes, to: &list) {
                        groups[index].beforeImages = nil   // cannot happen (the hook wrote them): not undoable, never wrong
                        break
                    }
                }
                if groups[index].beforeImages != nil { groups[index].beforeImages = list }
            }
        }
        return groups.filter { $0.count > 0 }
    }

    /// ``groups(keepingKeys:)`` for a transaction that changed one row, as most do: its one group,
    /// without the tables that merge a key's several changes.
    private func singleChange(keepingKeys: Bool) -> Group {
        let entry = entries[0]
        let name = groupNames[entry.group]
        var group = Group(table: name.table, operation: name.operation, count: 1, keys: [])
        keyBytes.withUnsafeBufferPointer { keys in
            let key = UnsafeBufferPointer(rebasing: keys[0..<entry.keyEnd])
            group.keys.reserveCapacity(entry.keyEnd + 5)
            RowKey.appendToList(key, to: &group.keys)
            if keepingKeys { group.rowKeys = [RowKey(encoded: key)] }
        }
        // Its image, when the transaction kept images and it is an update or a delete (which
        // keeps none only when the hook could not read it: then the group has none).
        if hasBeforeImages && name.operation != .insert {
            if let image = images.first, image.entry == 0 {
                var list: [UInt8] = []
                let appended = imageBytes.withUnsafeBufferPointer { BeforeImage.appendMerged([0..<image.end], of: $0, to: &list) }
                group.beforeImages = appended ? list : nil
            }
        }
        return group
    }

    /// Installs the hook on `db`. The capture must outlive the connection's use.
    func install(on db: Database) {
        sqlite3_preupdate_hook(db.handle, { context, connection, operation, database, table, key1, key2 in
            guard let context, let connection, let database, let table else { return }
            let capture = Unmanaged<ChangeCapture>.fromOpaque(context).takeUnretainedValue()
            capture.capture(connection, operation, database, table, key1, key2)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Re-reads what the hook needs of every table when the schema changed since the last read:
    /// from SQLite's answers (see ``TableLayout``), never from the tables' SQL text.
    func refreshSchemaIfNeeded(_ db: Database) throws {
        let version = try db.fetchValue("PRAGMA schema_version", as: Int64.self) ?? 0
        guard version != schemaVersion else { return }
        let layouts = try TableLayout.all(in: db)
        var virtualTables: [String: String] = [:]
        for layout in layouts where layout.kind == .virtual { virtualTables[SQLIdentifier.folded(layout.name)] = layout.name }
        var captures: [String: TableCapture] = [:]
        for layout in layouts where layout.kind != .virtual {
            captures[layout.name] = try capture(of: layout, virtualTables: virtualTables, in: db)
        }
        tables = captures
        schemaVersion = version
        textIsUTF8 = try db.fetchValue("PRAGMA encoding", as: String.self) == "UTF-8"
        forgetCurrentTable()
    }

    /// What the hook needs of the table `layout` describes.
    private func capture(of layout: TableLayout, virtualTables: [String: String], in db: Database) throws -> TableCapture {
        let writable = layout.writableColumns
        let withoutRowid = layout.withoutRowid
        func numbered(_ positions: [Int]) -> Numbered {
            func numbers(_ operation: Int32, new: Bool) -> [Int32] {
                switch numbering.numbering(withoutRowid: withoutRowid, operation: operation, new: new) {
                case .table: positions.map { Int32($0) }
                case .storage: positions.map { Int32(layout.storagePosition(of: $0) ?? -1) }
                }
            }
            return Numbered(insertNew: numbers(SQLITE_INSERT, new: true), updateOld: numbers(SQLITE_UPDATE, new: false),
                            updateNew: numbers(SQLITE_UPDATE, new: true), deleteOld: numbers(SQLITE_DELETE, new: false))
        }
        let key: KeyColumns = layout.isKeyedByRowid ? .rowid : .columns(numbered(layout.primaryKey), withoutRowid: withoutRowid)
        let keyTakesText = layout.primaryKey.count == 1 && !layout.isKeyedByRowid
            && Self.storesTextAsGiven(declaredType: layout.columns[layout.primaryKey[0]].declaredType)
        var defaults = [SQLValue?](repeating: nil, count: writable.count)
        if numbering.addedColumnReadsNull {
            for (index, position) in writable.enumerated() {
                guard let expression = layout.columns[position].defaultExpression else { continue }
                // SQLite's own text of a constant (ALTER TABLE ADD COLUMN allows no other).
                defaults[index] = try? db.fetchAll("SELECT " + expression).first?.values.first
            }
        }
        let owner = layout.kind == .shadow ? TableLayout.owner(ofShadow: layout.name, among: virtualTables) : nil
        var capture = TableCapture(key: key, keyTakesText: keyTakesText, image: numbered(writable), defaults: defaults,
                                   shadowOwner: owner)
        capture.keyNames = layout.isKeyedByRowid
            ? layout.rowidName.map { [$0] }
            : layout.primaryKey.map { SQLIdentifier.quoted(layout.columns[$0].name) }
        capture.imageNames = writable.map { SQLIdentifier.quoted(layout.columns[$0].name) }
        if let alias = layout.rowidAlias {
            capture.rowidImagePosition = writable.firstIndex(of: alias)
            capture.keepsImages = !(numbering.misreadsRowidAfterVirtualColumn && layout.storagePosition(of: alias) != alias)
        }
        return capture
    }

    /// Turns rows of tables created in this transaction into changes, now that their keys are known.
    func resolvePending(_ db: Database) throws {
        guard !pending.isEmpty else { return }
        try refreshSchemaIfNeeded(db)
        for row in pending {
            let table = tables[row.table]
            if let owner = table?.shadowOwner {
                virtualChanges.append(owner)
                continue
            }
            switch table?.key {
            case .columns(let columns, _)?:
                let numbers = switch row.operation {
                case .insert: columns.insertNew
                case .update: columns.updateNew
                case .delete: columns.deleteOld
                }
                for column in numbers {
                    RowKey.append(row.values.indices.contains(Int(column)) ? row.values[Int(column)] : .null, to: &keyBytes)
                }
            default:
                RowKey.appendInteger(row.rowid, to: &keyBytes)
            }
            entries.append(Entry(keyEnd: keyBytes.count, group: group(table: row.table, row.operation)))
        }
        pending.removeAll()
    }

    // MARK: Statements SQLite stopped

    /// A row some change named: its table and key.
    private struct TouchedRow: Hashable {
        var table: String
        var key: RowKey
    }

    /// Whether SQLite kept the changes captured since `mark`, those of one statement that failed
    /// inside the transaction: `true` when it kept them (`FAIL`, `RAISE(FAIL, …)`), `false` when
    /// it undid them (`ABORT`, the default), `nil` when the rows cannot tell.
    ///
    /// Undone, every row is as it was before the statement; kept, as the statement's last change
    /// of it left it. So a row that existed before and not after (or the reverse) tells which by
    /// existing now, and a row that existed both times tells it when its values now differ from
    /// its before-image. Rows that read the same either way tell nothing; when all are such,
    /// nothing the statement did can be seen, and its changes are taken as undone.
    func statementKept(since mark: Mark, in db: Database) -> Bool? {
        var unknown = pending.count > mark.pending || virtualChanges.count > mark.virtual
        var spans: [TouchedRow: (first: Int, last: Int)] = [:]
        var order: [TouchedRow] = []
        keyBytes.withUnsafeBufferPointer { keys in
            for index in mark.changes..<entries.count {
                let start = index == 0 ? 0 : entries[index - 1].keyEnd
                let key = RowKey(encoded: UnsafeBufferPointer(rebasing: keys[start..<entries[index].keyEnd]))
                let row = TouchedRow(table: groupNames[entries[index].group].table, key: key)
                if let span = spans[row] {
                    spans[row] = (span.first, index)
                } else {
                    spans[row] = (index, index)
                    order.append(row)
                }
            }
        }
        for row in order {
            guard let (first, last) = spans[row] else { continue }
            let existedBefore = groupNames[entries[first].group].operation != .insert
            let existsAfter = groupNames[entries[last].group].operation != .delete
            guard existedBefore || existsAfter else { continue }   // inserted, then deleted: no trace
            guard let table = tables[row.table], let keyNames = table.keyNames else {
                unknown = true
                continue
            }
            // A row there both times: the columns its first change kept old values of.
            var columns: [(name: String, old: Range<Int>)] = []
            if existedBefore && existsAfter {
                guard let slot = images.firstIndex(where: { $0.entry == first }) else {
                    unknown = true
                    continue
                }
                let range = (slot == 0 ? 0 : images[slot - 1].end)..<images[slot].end
                guard let view = imageBytes.withUnsafeBufferPointer({ BeforeImage.View($0, range) }),
                      view.columns.allSatisfy({ table.imageNames.indices.contains($0.position) }) else {
                    unknown = true
                    continue
                }
                columns = view.columns.map { (table.imageNames[$0.position], $0.value) }
                if columns.isEmpty { continue }   // an update that changed no value
            }
            let current: [[UInt8]]?
            do {
                current = try currentRow(db, table: row.table, keyNames: keyNames, key: row.key, columns: columns.map(\.name))
            } catch {
                unknown = true
                continue
            }
            guard existedBefore && existsAfter else { return (current != nil) == existsAfter }
            guard let current else {
                unknown = true   // neither state: cannot be
                continue
            }
            let differs = imageBytes.withUnsafeBufferPointer { bytes in
                zip(current, columns).contains { value, column in !value.elementsEqual(bytes[column.old]) }
            }
            if differs { return true }
        }
        return unknown ? nil : false
    }

    /// The row of `table` with `key` now, as the encodings (see ``RowKey``) of `columns`; `nil`
    /// when there is none.
    private func currentRow(_ db: Database, table: String, keyNames: [String], key: RowKey,
                            columns: [String]) throws -> [[UInt8]]? {
        let condition = keyNames.enumerated().map { "\($1) IS ?\($0 + 1)" }.joined(separator: " AND ")
        let statement = try db.makeStatement("SELECT \((["1"] + columns).joined(separator: ", ")) FROM main."
                                             + "\(SQLIdentifier.quoted(table)) WHERE \(condition)")
        _ = try key.bind(to: statement, at: 1)
        guard try statement.step() else { return nil }
        return columns.indices.map { index in
            var encoded: [UInt8] = []
            RowKey.append(sqlite3_column_value(statement.handle, Int32(index + 1)), textIsUTF8: textIsUTF8, to: &encoded)
            return encoded
        }
    }

    // MARK: Keys known in advance

    /// Until ``stopExpectingInserts()``, the rows that statements insert into `table` may have
    /// their key announced with ``expectKey(_:)``, which spares the hook reading the new row
    /// (an unpacked copy of the whole record per row). A collection's batch insert does this.
    func expectInserts(into table: String) {
        expectedTable = table
        hasExpectedKey = false
    }

    /// The key, as the text bound to the key column, of the row the next step of the running
    /// statement inserts. Used only for that row (a row inserted by the statement itself, not
    /// by a trigger) when the key column stores text as given; forgotten after the step (see
    /// ``forgetExpectedKey()``).
    ///
    /// A key longer than ``expectedKeyLimit`` is not kept: the hook reads it from the new row,
    /// which costs one copy of it where keeping it costs two.
    @inline(__always)
    func expectKey(_ key: UnsafeBufferPointer<UInt8>) {
        guard key.count <= Self.expectedKeyLimit else {
            hasExpectedKey = false
            return
        }
        expectedKey.removeAll(keepingCapacity: true)
        RowKey.appendBytes(UnsafeRawBufferPointer(key), tag: RowKey.Tag.text, to: &expectedKey)
        hasExpectedKey = true
    }

    /// The longest key ``expectKey(_:)`` keeps, in bytes.
    static var expectedKeyLimit: Int { 4096 }

    /// Forgets the announced key (its statement stepped, whether or not it inserted the row).
    @inline(__always)
    func forgetExpectedKey() {
        hasExpectedKey = false
    }

    /// Ends ``expectInserts(into:)``.
    func stopExpectingInserts() {
        expectedTable = nil
        hasExpectedKey = false
    }

    /// Whether a column of this declared type keeps a text value as it is given: TEXT affinity
    /// (the type contains `CHAR`, `CLOB` or `TEXT`) or BLOB affinity (no type, or `BLOB`), by
    /// SQLite's rules, which check `INT` first. Other affinities may turn `'007'` into `7`.
    static func storesTextAsGiven(declaredType: String) -> Bool {
        let type = declaredType.uppercased()
        if type.contains("INT") { return false }
        if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") { return true }
        return type.isEmpty || type.contains("BLOB")
    }

    // MARK: The hook

    private func capture(_ connection: OpaquePointer, _ operation: Int32, _ database: UnsafePointer<CChar>,
                         _ name: UnsafePointer<CChar>, _ key1: Int64, _ key2: Int64) {
        guard strcmp(database, "main") == 0 else { return }
        if tableName == nil || strcmp(tableName!, name) != 0 { switchTable(to: name) }
        guard table.logged else { return }
        if operation != SQLITE_DELETE && sqlite3_preupdate_depth(connection) == 0 { statementWrites &+= 1 }

        switch table.capture?.key {
        case .rowid?:
            switch operation {
            case SQLITE_INSERT: appendRowid(key2, .insert)
            case SQLITE_DELETE:
                appendRowid(key1, .delete)
                appendRowImage(connection, rowid: key1, entry: entries.count - 1, operation: operation)
            default:
                if key1 == key2 {
                    appendRowid(key1, .update)
                    appendChangedColumns(connection, changedRowid: nil, entry: entries.count - 1)
                } else {
                    appendRowid(key1, .delete)
                    appendRowImage(connection, rowid: key1, entry: entries.count - 1, operation: operation)
                    appendRowid(key2, .insert)
                }
            }
        case .columns(let columns, let withoutRowid)?:
            switch operation {
            case SQLITE_INSERT:
                if hasExpectedKey && table.keyTakesText && textIsUTF8 && sqlite3_preupdate_depth(connection) == 0
                    && table.name == expectedTable {
                    // The row the collection's insert statement itself inserts (triggers run
                    // deeper): its key is the text just bound, stored as given.
                    hasExpectedKey = false
                    keyBytes.append(contentsOf: expectedKey)
                } else {
                    appendKey(connection, columns.insertNew, new: true)
                }
                endEntry(.insert)
            case SQLITE_DELETE:
                appendKey(connection, columns.deleteOld, new: false)
                endEntry(.delete)
                appendRowImage(connection, rowid: withoutRowid ? nil : key1, entry: entries.count - 1, operation: operation)
            default:
                let start = keyBytes.count
                appendKey(connection, columns.updateOld, new: false)
                // The new key is compared with the old one where it lies (a key may be large).
                if keyMatches(connection, columns.updateNew, from: start) {
                    endEntry(.update)
                    let changedRowid = withoutRowid || key1 == key2 ? nil : key1
                    appendChangedColumns(connection, changedRowid: changedRowid, entry: entries.count - 1)
                } else {
                    endEntry(.delete)
                    appendRowImage(connection, rowid: withoutRowid ? nil : key1, entry: entries.count - 1, operation: operation)
                    appendKey(connection, columns.updateNew, new: true)
                    endEntry(.insert)
                }
            }
        case nil:
            // A table created in this transaction: keep the whole row until its key is known.
            let useNew = operation != SQLITE_DELETE
            let count = sqlite3_preupdate_count(connection)
            let values = (0..<count).map { Self.sqlValue(Self.preupdateValue(connection, $0, new: useNew)) }
            let kind: Operation = operation == SQLITE_INSERT ? .insert : operation == SQLITE_DELETE ? .delete : .update
            pending.append(PendingRow(table: table.name, operation: kind, rowid: useNew ? key2 : key1, values: values))
        }
    }

    private func switchTable(to name: UnsafePointer<CChar>) {
        free(tableName)
        tableName = strdup(name)
        let text = String(cString: name)
        // Case-insensitive, as SQLite's names (and the schema query's LIKE) are.
        let folded = SQLIdentifier.folded(text)
        var logged = !folded.hasPrefix("ripple_") && !folded.hasPrefix("sqlite_")
        let capture = logged ? tables[text] : nil
        if let owner = capture?.shadowOwner {
            // A virtual table's module writes its shadow tables: the virtual table changed.
            if virtualChanges.last != owner { virtualChanges.append(owner) }
            logged = false
        }
        table = CurrentTable(name: text, logged: logged, capture: capture, keyTakesText: capture?.keyTakesText ?? false)
    }

    private func forgetCurrentTable() {
        free(tableName)
        tableName = nil
        table = CurrentTable()
    }

    /// The group of `operation` on the current table.
    @inline(__always)
    private func group(_ operation: Operation) -> Int {
        let cached = switch operation {
        case .insert: table.groups.0
        case .update: table.groups.1
        case .delete: table.groups.2
        }
        if cached >= 0 { return cached }
        let found = group(table: table.name, operation)
        switch operation {
        case .insert: table.groups.0 = found
        case .update: table.groups.1 = found
        case .delete: table.groups.2 = found
        }
        return found
    }

    /// The group of `operation` on `table`, created when new.
    private func group(table: String, _ operation: Operation) -> Int {
        if let index = groupNames.firstIndex(where: { $0.operation == operation && $0.table == table }) { return index }
        groupNames.append((table, operation))
        return groupNames.count - 1
    }

    /// Ends the entry whose key was just appended.
    @inline(__always)
    private func endEntry(_ operation: Operation) {
        entries.append(Entry(keyEnd: keyBytes.count, group: group(operation)))
    }

    @inline(__always)
    private func appendRowid(_ rowid: Int64, _ operation: Operation) {
        RowKey.appendInteger(rowid, to: &keyBytes)
        endEntry(operation)
    }

    // MARK: Before-images

    /// Appends the whole row the hook reports (its old values: each writable column, see
    /// ``TableLayout/writableColumns``) as change `entry`'s before-image: a delete, or an update
    /// that changed the key. `rowid`: `nil` for a `WITHOUT ROWID` table.
    private func appendRowImage(_ connection: OpaquePointer, rowid: Int64?, entry: Int, operation: Int32) {
        guard let capture = table.capture, capture.keepsImages else { return }
        imageBytes.append(BeforeImage.Kind.row)
        if let rowid { RowKey.appendInteger(rowid, to: &imageBytes) } else { imageBytes.append(RowKey.Tag.null) }
        let columns = operation == SQLITE_DELETE ? capture.image.deleteOld : capture.image.updateOld
        for (index, column) in columns.enumerated() {
            if index == capture.rowidImagePosition, let rowid {
                RowKey.appendInteger(rowid, to: &imageBytes)   // the rowid's alias holds the rowid
                continue
            }
            let value = Self.preupdateValue(connection, column, new: false)
            if let missing = numbering.missingValue, value == missing, let fallback = capture.defaults[index] {
                RowKey.append(fallback, to: &imageBytes)
            } else {
                RowKey.append(value, textIsUTF8: textIsUTF8, to: &imageBytes)
            }
        }
        images.append((entry, imageBytes.count))
    }

    /// Appends the old values of the columns an update changed (by type and bytes) as change
    /// `entry`'s before-image; `changedRowid`: the old rowid when the update changed it.
    private func appendChangedColumns(_ connection: OpaquePointer, changedRowid: Int64?, entry: Int) {
        guard let capture = table.capture, capture.keepsImages else { return }
        imageBytes.append(BeforeImage.Kind.columns)
        if let changedRowid { RowKey.appendInteger(changedRowid, to: &imageBytes) } else { imageBytes.append(RowKey.Tag.null) }
        let (olds, news) = (capture.image.updateOld, capture.image.updateNew)
        // The rowid's alias is not compared: an update that keeps the rowid keeps it.
        for index in olds.indices where index != capture.rowidImagePosition {
            let old = Self.preupdateValue(connection, olds[index], new: false)
            let new = Self.preupdateValue(connection, news[index], new: true)
            if let missing = numbering.missingValue, old == missing, let fallback = capture.defaults[index] {
                // A row written before the column was added: its value was the default.
                var encoded: [UInt8] = []
                RowKey.append(fallback, to: &encoded)
                var current: [UInt8] = []
                RowKey.append(new, textIsUTF8: textIsUTF8, to: &current)
                if encoded == current { continue }
                RowKey.appendLength(index, to: &imageBytes)
                imageBytes.append(contentsOf: encoded)
                continue
            }
            if Self.same(old, new, textIsUTF8: textIsUTF8) { continue }
            RowKey.appendLength(index, to: &imageBytes)
            RowKey.append(old, textIsUTF8: textIsUTF8, to: &imageBytes)
        }
        images.append((entry, imageBytes.count))
    }

    /// Whether two values are the same stored value: the same type and the same bytes (reals by
    /// their bit pattern, so `-0.0` is not `0.0`). A value SQLite could not give is never the same.
    private static func same(_ old: OpaquePointer?, _ new: OpaquePointer?, textIsUTF8: Bool) -> Bool {
        guard let old, let new else { return false }
        let type = sqlite3_value_type(old)
        guard type == sqlite3_value_type(new) else { return false }
        switch type {
        case SQLITE_INTEGER:
            return sqlite3_value_int64(old) == sqlite3_value_int64(new)
        case SQLITE_FLOAT:
            return sqlite3_value_double(old).bitPattern == sqlite3_value_double(new).bitPattern
        case SQLITE_NULL:
            return true
        case SQLITE_TEXT where !textIsUTF8:
            // UTF-16 as stored (or byte-swapped, the same for both): no lossy conversion.
            return sameBytes(sqlite3_value_text16(old), Int(sqlite3_value_bytes16(old)),
                             sqlite3_value_text16(new), Int(sqlite3_value_bytes16(new)))
        default:
            // UTF-8 text or a blob: the stored bytes (`sqlite3_value_blob` does not convert text).
            return sameBytes(sqlite3_value_blob(old), Int(sqlite3_value_bytes(old)),
                             sqlite3_value_blob(new), Int(sqlite3_value_bytes(new)))
        }
    }

    @inline(__always)
    private static func sameBytes(_ lhs: UnsafeRawPointer?, _ lhsCount: Int, _ rhs: UnsafeRawPointer?, _ rhsCount: Int) -> Bool {
        guard lhsCount == rhsCount else { return false }
        guard lhsCount > 0 else { return true }
        guard let lhs, let rhs else { return false }
        return memcmp(lhs, rhs, lhsCount) == 0
    }

    /// Whether the row's new values of `columns` are the key encoded in `keyBytes` from `start`
    /// on (its old key, just appended), compared where it lies.
    private func keyMatches(_ connection: OpaquePointer, _ columns: [Int32], from start: Int) -> Bool {
        keyBytes.withUnsafeBufferPointer { bytes in
            var offset = start
            for column in columns {
                guard let new = Self.preupdateValue(connection, column, new: true) else { return false }
                let type = sqlite3_value_type(new)
                switch RowKey.value(in: bytes, at: &offset) {
                case .integer(let value)?:
                    guard type == SQLITE_INTEGER, sqlite3_value_int64(new) == value else { return false }
                case .real(let value)?:
                    guard type == SQLITE_FLOAT, sqlite3_value_double(new).bitPattern == value.bitPattern else { return false }
                case .text(let text)?:
                    guard type == SQLITE_TEXT else { return false }
                    // As ``RowKey/append(_:textIsUTF8:to:)`` read the old key.
                    let pointer = textIsUTF8 ? sqlite3_value_blob(new) : UnsafeRawPointer(sqlite3_value_text(new))
                    guard Self.sameBytes(pointer, Int(sqlite3_value_bytes(new)), text.baseAddress, text.count) else { return false }
                case .blob(let blob)?:
                    guard type == SQLITE_BLOB,
                          Self.sameBytes(sqlite3_value_blob(new), Int(sqlite3_value_bytes(new)), blob.baseAddress, blob.count) else {
                        return false
                    }
                case .null?:
                    guard type == SQLITE_NULL else { return false }
                case nil:
                    return false
                }
            }
            return offset == bytes.count
        }
    }

    /// Appends the key of the row's `columns` (old or new values, numbered as the hook numbers
    /// them for this change), exactly as stored.
    @inline(__always)
    private func appendKey(_ connection: OpaquePointer, _ columns: [Int32], new: Bool) {
        for column in columns {
            RowKey.append(Self.preupdateValue(connection, column, new: new), textIsUTF8: textIsUTF8, to: &keyBytes)
        }
    }

    @inline(__always)
    private static func preupdateValue(_ connection: OpaquePointer, _ column: Int32, new: Bool) -> OpaquePointer? {
        var pointer: OpaquePointer?
        let code = new ? sqlite3_preupdate_new(connection, column, &pointer) : sqlite3_preupdate_old(connection, column, &pointer)
        return code == SQLITE_OK ? pointer : nil
    }

    private static func sqlValue(_ value: OpaquePointer?) -> SQLValue {
        guard let value else { return .null }
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let bytes = sqlite3_value_text(value) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_value_bytes(value))), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let bytes = sqlite3_value_blob(value) else { return .blob([]) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    // MARK: Numbers and bytes as text

    /// Appends `value` in decimal, without going through a `String`.
    @inline(__always)
    static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        var magnitude = value.magnitude
        if magnitude < 10 && value >= 0 {
            bytes.append(UInt8(truncatingIfNeeded: magnitude) &+ UInt8(ascii: "0"))
            return
        }
        // At most 20 bytes: 19 digits and a sign.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var index = 24
            repeat {
                index -= 1
                buffer[index] = UInt8(truncatingIfNeeded: magnitude % 10) &+ UInt8(ascii: "0")
                magnitude /= 10
            } while magnitude != 0
            if value < 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `blob` in lower-case hex (as the log writes blobs, in keys and before-images).
    static func appendHex(_ blob: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + 2 * blob.count)
        for byte in blob {
            bytes.append(hexDigits[Int(byte >> 4)])
            bytes.append(hexDigits[Int(byte & 0xF)])
        }
    }
}

/// The changes of a ``ChangeCapture``, one by one: each key becomes a ``RowKey`` when read.
struct ChangeList: RandomAccessCollection {
    fileprivate let entries: [ChangeCapture.Entry]
    fileprivate let keyBytes: [UInt8]
    fileprivate let groupNames: [(table: String, operation: ChangeCapture.Operation)]

    var startIndex: Int { 0 }
    var endIndex: Int { entries.count }

    subscript(position: Int) -> ChangeCapture.Change {
        let entry = entries[position]
        let start = position == 0 ? 0 : entries[position - 1].keyEnd
        let key = keyBytes.withUnsafeBufferPointer { bytes in RowKey(encoded: UnsafeBufferPointer(rebasing: bytes[start..<entry.keyEnd])) }
        let group = groupNames[entry.group]
        return ChangeCapture.Change(table: group.table, operation: group.operation, rowKey: key)
    }
}

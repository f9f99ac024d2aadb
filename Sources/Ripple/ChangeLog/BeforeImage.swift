/// Before-images in the change log's binary form (`Migrations/0004_compact_before_images.sql`):
/// what an update or a delete logs so that time travel can undo it exactly.
///
/// An image is a kind byte, then values in ``RowKey``'s encoding (type byte; 8 bytes, or a
/// LEB128 length and the bytes; or nothing):
///
/// * ``Kind/row``: the rowid (NULL for a `WITHOUT ROWID` table), then every column's value in
///   column order — a delete, or an update that changed the row's key;
/// * ``Kind/columns``: the rowid before the change (NULL when the change left it), then for each
///   column the change altered, its position (LEB128) and its old value, positions increasing —
///   an update that kept the key.
///
/// An entry's images form a list parallel to its keys: per key the image's length (LEB128) and
/// the image, a length of 0 for none.
enum BeforeImage {
    enum Kind {
        static let row: UInt8 = 1
        static let columns: UInt8 = 2
    }

    /// An image, read in place: where its values lie in the buffer it was read from.
    struct View {
        var isRow: Bool
        /// The rowid's value (an integer or NULL).
        var rowid: Range<Int>
        /// The columns' values, by position: every column in order for a row image, the changed
        /// columns in increasing position for a columns image.
        var columns: [(position: Int, value: Range<Int>)]

        /// Reads the image in `range` of `bytes`; `nil` when it is malformed.
        init?(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
            guard range.count > 1, range.upperBound <= bytes.count else { return nil }
            let end = UnsafeBufferPointer(rebasing: bytes[..<range.upperBound])
            isRow = bytes[range.lowerBound] == Kind.row
            guard isRow || bytes[range.lowerBound] == Kind.columns else { return nil }
            var offset = range.lowerBound + 1
            guard let value = RowKey.value(in: end, at: &offset) else { return nil }
            switch value {
            case .integer, .null: rowid = range.lowerBound + 1..<offset
            default: return nil
            }
            columns = []
            var previous = -1
            while offset < range.upperBound {
                var position = columns.count
                if !isRow {
                    guard let read = RowKey.readLength(end, at: &offset), read > previous else { return nil }
                    position = read
                    previous = read
                }
                let start = offset
                guard RowKey.value(in: end, at: &offset) != nil else { return nil }
                columns.append((position, start..<offset))
            }
        }

        /// Whether the rowid is NULL (a columns image: the change left it).
        func rowidIsNull(in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            rowid.count == 1 && bytes[rowid.lowerBound] == RowKey.Tag.null
        }
    }

    // MARK: Merging, as the change log writes images

    /// Appends to `list` the image of a key that one transaction changed several times, from the
    /// images its changes captured (`images`, ranges of `bytes`, in the order of the changes, the
    /// first one the key's first change in the transaction, an update or a delete): each column
    /// as it was before the transaction, the rowid too.
    ///
    /// A column's value before the transaction is its old value in the first image that has it:
    /// until a change touches a column, it holds its value from before the transaction. Once a
    /// row image comes (the row was deleted, or its key changed), every column is known and later
    /// images — of a row inserted again under the key — tell nothing about the time before.
    ///
    /// Returns `false` when an image is malformed (nothing is appended then).
    static func appendMerged(_ images: [Range<Int>], of bytes: UnsafeBufferPointer<UInt8>, to list: inout [UInt8]) -> Bool {
        guard let first = images.first else { return false }
        guard let firstView = View(bytes, first) else { return false }
        if images.count == 1 || firstView.isRow {
            RowKey.appendToList(UnsafeBufferPointer(rebasing: bytes[first]), to: &list)
            return true
        }
        var rowid: Range<Int>? = firstView.rowidIsNull(in: bytes) ? nil : firstView.rowid
        var known: [Int: Range<Int>] = [:]
        var rowImage: View?
        for range in images {
            guard let view = range == first ? firstView : View(bytes, range) else { return false }
            if rowid == nil && (view.isRow || !view.rowidIsNull(in: bytes)) { rowid = view.rowid }
            for column in view.columns where known[column.position] == nil { known[column.position] = column.value }
            if view.isRow {
                rowImage = view
                break
            }
        }
        var image: [UInt8] = [rowImage == nil ? Kind.columns : Kind.row]
        if let rowid { image.append(contentsOf: bytes[rowid]) } else { image.append(RowKey.Tag.null) }
        if let rowImage {
            // Every position from 0 is known: the row image has them all.
            for position in rowImage.columns.indices { image.append(contentsOf: bytes[known[position]!]) }
        } else {
            for (position, value) in known.sorted(by: { $0.key < $1.key }) {
                RowKey.appendLength(position, to: &image)
                image.append(contentsOf: bytes[value])
            }
        }
        image.withUnsafeBufferPointer { RowKey.appendToList($0, to: &list) }
        return true
    }

    // MARK: Reading, for time travel

    /// The images of a list, one per key (`nil` where a key has none), as ranges of `bytes`, or
    /// `nil` when the list is malformed.
    static func list(_ bytes: UnsafeBufferPointer<UInt8>) -> [Range<Int>?]? {
        var images: [Range<Int>?] = []
        var offset = 0
        while offset < bytes.count {
            guard let length = RowKey.readLength(bytes, at: &offset), offset + length <= bytes.count else { return nil }
            images.append(length == 0 ? nil : offset..<offset + length)
            offset += length
        }
        return images
    }

    /// The row an image restores, as ``RowKey`` encodings one after the other — the rowid, then
    /// each of the table's `width` columns — given, for a columns image, the row as it is now in
    /// the same form (`current`). `nil` when the image does not fit a row of `width` columns (a
    /// row image of fewer columns is of a row from before columns were appended: NULL in them).
    static func restoredRow(_ view: View, of bytes: UnsafeBufferPointer<UInt8>, width: Int,
                            current: UnsafeBufferPointer<UInt8>?) -> [UInt8]? {
        var row: [UInt8] = []
        if view.isRow {
            // A row logged before columns were appended to the table (a history-preserving
            // schema change, see `Database.declareHistoryPreservingSchemaChange()`) held no
            // value in them: NULL.
            guard view.columns.count <= width else { return nil }
            row.append(contentsOf: bytes[view.rowid])
            for column in view.columns { row.append(contentsOf: bytes[column.value]) }
            for _ in view.columns.count..<width { row.append(RowKey.Tag.null) }
            return row
        }
        guard let current, let now = values(of: current), now.count == width + 1,
              view.columns.allSatisfy({ $0.position < width }) else { return nil }
        row.append(contentsOf: view.rowidIsNull(in: bytes) ? current[now[0]] : bytes[view.rowid])
        var changed = view.columns.makeIterator()
        var next = changed.next()
        for position in 0..<width {
            if let column = next, column.position == position {
                row.append(contentsOf: bytes[column.value])
                next = changed.next()
            } else {
                row.append(contentsOf: current[now[position + 1]])
            }
        }
        return row
    }

    /// The ranges of the values one after the other in `bytes`, or `nil` when malformed.
    static func values(of bytes: UnsafeBufferPointer<UInt8>) -> [Range<Int>]? {
        var ranges: [Range<Int>] = []
        var offset = 0
        while offset < bytes.count {
            let start = offset
            guard RowKey.value(in: bytes, at: &offset) != nil else { return nil }
            ranges.append(start..<offset)
        }
        return ranges
    }
}

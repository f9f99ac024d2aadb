import Foundation

/// Text compared as SQLite compares it, by its UTF-8 bytes. Swift's `String` equality folds
/// canonically equivalent spellings (`"\u{e9}"` and `"e\u{301}"` are equal strings): as the key
/// of a cache of SQL or of arguments, it would take one text for another.
struct ExactText: Hashable, Sendable {
    let text: String

    init(_ text: String) { self.text = text }

    static func == (lhs: ExactText, rhs: ExactText) -> Bool {
        let left = lhs.text.utf8, right = rhs.text.utf8
        guard left.count == right.count else { return false }
        // Native strings hold their UTF-8 contiguously: one memcmp (a cache lookup's cost).
        let compared = left.withContiguousStorageIfAvailable { left in
            right.withContiguousStorageIfAvailable { right in
                left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0
            }
        }
        return (compared ?? nil) ?? left.elementsEqual(right)
    }

    func hash(into hasher: inout Hasher) {
        let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil { Array(text.utf8).withUnsafeBytes { hasher.combine(bytes: $0) } }
    }
}

import Foundation

/// The record most store tests use: every common property kind, a nested array (stored as JSON
/// text) and an optional.
struct Todo: Codable, Sendable, Identifiable, Equatable {
    var id: UUID
    var title: String
    var rank: Int
    var done: Bool
    var tags: [String]
    var due: Date?
}

import Foundation
import Ripple
import RippleTesting
import Testing

@Suite struct EventRecorderTests {
    struct Note: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var body: String
    }

    @Test func anImmediateRecorderHasEveryEventWhenTheWriteReturns() throws {
        let store = try Store.inMemory()
        let notes = try store.collection("notes", of: Note.self)
        let recorder = EventRecorder(try notes.order(by: Column("id")).live())
        #expect(recorder.snapshots == [[]])
        try notes.insert(Note(id: 1, body: "a"))
        try notes.insert(Note(id: 2, body: "b"))
        #expect(recorder.snapshots == [[], [Note(id: 1, body: "a")], [Note(id: 1, body: "a"), Note(id: 2, body: "b")]])
        #expect(recorder.events.last?.changeset.inserts == [1])
        recorder.stop()
        try notes.delete(id: 1)
        #expect(recorder.events.count == 3)
        #expect(recorder.error == nil)
    }

    @Test func aQueuedRecorderIsWaitedFor() throws {
        let store = try Store.inMemory()
        let notes = try store.collection("notes", of: Note.self)
        let recorder = EventRecorder(try notes.all.live(), on: .queue(DispatchQueue(label: "recorder")))
        try notes.insert(Note(id: 1, body: "a"))
        #expect(recorder.wait { $0.last?.snapshot == [Note(id: 1, body: "a")] })
    }

    @Test func theErrorThatEndsTheStreamIsKept() throws {
        let store = try Store.inMemory()
        try store.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
        let recorder = EventRecorder(store.liveQuery(sql: "SELECT id FROM t", identity: "id"))
        try store.write { db in try db.execute("DROP TABLE t") }
        #expect(recorder.error != nil)
    }
}

#if Sync
import Foundation
@testable import RippleServer
import RippleSync
import Testing

/// A socket's frames as a pure value: events filed by version, one frame per version, ended
/// subscriptions, heartbeats, and the bounded queue — without sockets or Postgres.
@Suite struct SocketFramesTests {
    static func event(_ kind: SubscriptionEvent.Kind, _ json: String, version: Int64 = 1) -> SubscriptionEvent {
        SubscriptionEvent(version: version, kind: kind, json: Array(json.utf8))
    }

    static let snapshot = event(.snapshot(WireSnapshot(basis: "b", columns: ["id"], types: ["int8"], key: [0], rows: [])), #"{"S":1}"#)
    static let change = event(.changes(WireChangeset()), #"{"C":1}"#)

    /// Positions by version, for labels.
    static func position(_ version: Int64) -> PGOutput.LSN { PGOutput.LSN(UInt64(version) * 0x100) }

    static func reserve(_ frames: inout SocketFrames, _ id: String) -> Int? { frames.reserve(id) }

    static func drain(_ frames: inout SocketFrames) -> [String] {
        var out: [String] = []
        while let next = frames.next() {
            frames.written(next.count)
            out.append(String(decoding: next, as: UTF8.self))
        }
        return out
    }

    @Test func aVersionsEventsAcrossSubscriptionsAreOneFrameSentWhenItFinishes() throws {
        var frames = SocketFrames(maxQueuedBytes: 1 << 20)
        let a = try #require(Self.reserve(&frames, "a"))
        let b = try #require(Self.reserve(&frames, "b"))
        let again = frames.reserve("a")
        #expect(again == nil, "an id is held once")
        frames.file(Self.snapshot, subscription: "a", generation: a, at: 3)
        frames.file(Self.change, subscription: "b", generation: b, at: 3)
        frames.file(Self.change, subscription: "a", generation: a, at: 4)
        let early = frames.flush(upTo: 2, position: Self.position)
        #expect(!early, "nothing waits for version 2")
        #expect(Self.drain(&frames).isEmpty)
        let sent = frames.flush(upTo: 4, position: Self.position)
        #expect(sent)
        #expect(Self.drain(&frames) == [
            #"{"type":"changes","lsn":"0/300","snapshots":{"a":{"S":1}},"changesets":{"b":{"C":1}}}"#,
            #"{"type":"changes","lsn":"0/400","changesets":{"a":{"C":1}}}"#,
        ])
        #expect(frames.lastPosition == PGOutput.LSN(0x400))
    }

    @Test func anUnsubscribedOrReplacedSubscriptionsEventsAreNotSent() throws {
        var frames = SocketFrames(maxQueuedBytes: 1 << 20)
        let old = try #require(Self.reserve(&frames, "a"))
        frames.file(Self.change, subscription: "a", generation: old, at: 5)
        frames.remove("a")
        let new = try #require(Self.reserve(&frames, "a"))
        frames.file(Self.change, subscription: "a", generation: old, at: 5)
        frames.file(Self.snapshot, subscription: "a", generation: new, at: 5)
        frames.flush(upTo: 5, position: Self.position)
        #expect(Self.drain(&frames) == [#"{"type":"changes","lsn":"0/500","snapshots":{"a":{"S":1}}}"#])
    }

    @Test func anEndedSubscriptionIsToldAfterItsVersionsFrameAndForgotten() throws {
        var frames = SocketFrames(maxQueuedBytes: 1 << 20)
        let a = try #require(Self.reserve(&frames, "a"))
        let b = try #require(Self.reserve(&frames, "b"))
        frames.file(Self.change, subscription: "b", generation: b, at: 2)
        let ended = frames.file(Self.event(.ended(reason: "table t was dropped"), ""), subscription: "a", generation: a, at: 2)
        #expect(ended)
        #expect(frames.subscriptions.keys.sorted() == ["b"])
        frames.flush(upTo: 2, position: Self.position)
        #expect(Self.drain(&frames) == [
            #"{"type":"changes","lsn":"0/200","changesets":{"b":{"C":1}}}"#,
            #"{"type":"error","code":"subscription_ended","message":"table t was dropped","id":"a"}"#,
        ])
    }

    @Test func labelsNeverGoBackAndHeartbeatsComeOnlyWhenBehindWithNothingWaiting() throws {
        var frames = SocketFrames(maxQueuedBytes: 1 << 20)
        frames.start(at: PGOutput.LSN(0x900))
        let a = try #require(Self.reserve(&frames, "a"))
        // A snapshot read at an older version is labelled where the socket stands.
        frames.file(Self.snapshot, subscription: "a", generation: a, at: 2)
        let whileWaiting = frames.heartbeat(version: 2, position: PGOutput.LSN(0xA00))
        #expect(!whileWaiting, "not while a frame waits")
        frames.flush(upTo: 2, position: Self.position)
        #expect(Self.drain(&frames) == [#"{"type":"changes","lsn":"0/900","snapshots":{"a":{"S":1}}}"#])
        let atItsPosition = frames.heartbeat(version: 2, position: PGOutput.LSN(0x900))
        #expect(!atItsPosition, "not at the position it stands at")
        let behind = frames.heartbeat(version: 10, position: PGOutput.LSN(0xA00))
        #expect(behind)
        #expect(Self.drain(&frames) == [#"{"type":"heartbeat","lsn":"0/A00"}"#])
    }

    @Test func aSocketWhoseWaitingFramesPassTheBoundIsDroppedWithOneError() {
        var frames = SocketFrames(maxQueuedBytes: 100)
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 150)
        let first = frames.push(big)
        #expect(first, "one frame larger than the bound is still sent")
        let writing = frames.next()
        #expect(writing?.count == 150)
        #expect(!frames.wasDropped)
        // The first is being written, not written yet: 150 bytes wait, past the bound.
        let second = frames.push(big)
        #expect(second, "the error is queued instead")
        #expect(frames.wasDropped && frames.isClosing)
        let left = Self.drain(&frames)
        #expect(left.count == 1 && left[0].contains("slow_consumer"))
        let after = frames.push(Array("{}".utf8))
        #expect(!after, "a dropped socket takes nothing more")
        #expect(frames.isFinished)
    }

    @Test func aLastFrameIsWrittenThenTheSocketIsFinished() {
        var frames = SocketFrames(maxQueuedBytes: 1 << 20)
        frames.pushLast(ServerMessage.error(code: .tokenExpired, message: "expired", id: nil).json)
        #expect(!frames.isFinished)
        #expect(Self.drain(&frames).count == 1)
        #expect(frames.isFinished)
        frames.close()
        let next = frames.next()
        #expect(next == nil)
    }
}
#endif

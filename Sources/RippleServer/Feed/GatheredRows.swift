#if Sync
import Logging
import NIOCore
import PostgresNIO
import Ripple

extension PostgresConnection {
    /// How long the node waits for the answer to one of its reads before it gives up on the
    /// connection: 15 s (a copy of a table waits as long as it takes).
    static let answerLimit = TimeAmount.seconds(15)

    /// Every row of `query`, gathered on the connection's event loop as they arrive; after
    /// `limit` without the whole answer, the connection is closed and the read fails.
    ///
    /// * Read through PostgresNIO's async sequence, rows wait for their reader to ask for more.
    ///   If Postgres drops the connection during that wait (a restart, a crash), PostgresNIO
    ///   1.33 hands over the socket's last bytes although no read was asked for, and stops the
    ///   process on a precondition. Gathered on the event loop, the rows never wait for a
    ///   reader, and a dropped connection fails the query like any other error.
    /// * Under repeated Postgres restarts, a read was seen never to return although Postgres
    ///   had answered it (its backend idle, waiting for the next query): the feed, waiting on
    ///   it, stood still. The limit turns that into an error the caller tries again from.
    /// * A cancelled task does not wait for the answer (a statement waiting on a lock, or on a
    ///   Postgres that restarts, would hold a stopping node up to the limit): the connection is
    ///   closed and the read throws `CancellationError`.
    ///
    /// The node reads every result with rows this way.
    func gatheredRows(_ query: PostgresQuery, logger: Logger, within limit: TimeAmount = answerLimit) async throws -> PostgresQueryResult {
        let answer: EventLoopFuture<PostgresQueryResult> = self.query(query, logger: logger)
        let connection = self
        let outcome = FirstOutcome<Result<PostgresQueryResult, any Error>>()
        let timer = eventLoop.scheduleTask(in: limit) {
            outcome.finish(.failure(PostgresAnswerTimeout(seconds: limit.nanoseconds / 1_000_000_000)))
            connection.close().whenComplete { _ in }
        }
        answer.whenComplete { result in
            timer.cancel()
            outcome.finish(result)
        }
        // A task that is cancelled (the node stopping, a socket gone) stops waiting at once:
        // the connection is closed, which ends an open transaction in Postgres without its
        // commit, and the read fails with `CancellationError`.
        return try await withTaskCancellationHandler {
            try await outcome.value.get()
        } onCancel: {
            outcome.finish(.failure(CancellationError()))
            connection.close().whenComplete { _ in }
        }
    }
}

extension PostgresClient {
    /// Every row of `query`, on a connection of the pool (see
    /// ``PostgresNIO/PostgresConnection/gatheredRows(_:logger:within:)``).
    func gatheredRows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresQueryResult {
        try await withConnection { connection in try await connection.gatheredRows(query, logger: logger) }
    }

    /// `body` on a connection of the pool, given up after `limit` (waiting for a connection
    /// included): the pool was seen, under repeated Postgres restarts, to keep a request waiting
    /// on a connection that never came. What runs then is cancelled; `body`'s statements are
    /// each bounded by their answer limit.
    ///
    /// - Throws: ``PostgresAnswerTimeout`` after `limit`; what `body` throws.
    func withConnection<T: Sendable>(within limit: Duration,
                                     _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await self.withConnection(body) }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw PostgresAnswerTimeout(seconds: limit.components.seconds)
            }
            return value
        }
    }
}

/// Postgres did not answer one of the node's reads in time: the connection was closed.
struct PostgresAnswerTimeout: Error, CustomStringConvertible {
    let seconds: Int64
    var description: String { "Postgres did not answer within \(seconds) s; the connection was closed" }
}
#endif

#if Sync
import Logging
import PostgresNIO
import RippleSyncTesting
import RippleTesting

extension ThrowawayPostgres {
    /// A PostgresNIO client of the cluster, as the superuser, without TLS or logging. It works
    /// while its `run()` runs.
    func makeClient() -> PostgresClient {
        let configuration = PostgresClient.Configuration(host: "127.0.0.1", port: port, username: ThrowawayPostgres.user,
                                                         password: nil, database: "postgres", tls: .disable)
        return PostgresClient(configuration: configuration,
                              backgroundLogger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
    }
}
#endif

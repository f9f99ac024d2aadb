#if Sync
import RippleSyncTesting
import Testing

extension TestNode {
    /// Stops the node; a node that does not stop in time fails the test.
    func stop() async {
        do { try await shutDown() } catch { Issue.record(error) }
    }
}
#endif

#if !Sync
import Foundation

/// `ripple-server` built without the package's `Sync` trait: it says how to build it with it.
@main enum WithoutSyncTrait {
    static func main() {
        FileHandle.standardError.write(Data("""
            ripple-server is part of Ripple Sync, which this build left out (the package's Sync trait).
            Run it with the trait: swift run --traits Sync ripple-server …

            """.utf8))
        exit(2)
    }
}
#endif

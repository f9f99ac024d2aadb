#if Sync
import RippleSyncTesting
import Testing

extension ResolverMode: CustomTestStringConvertible {
    public var testDescription: String { rawValue }
}
#endif

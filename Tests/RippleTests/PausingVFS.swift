import Foundation
import Ripple
import RippleSQLite
import RippleTesting

/// A VFS over the default one, for tests: a connection opened with it (``open(_:)``) pauses in
/// the `xSync` of its `-wal` file once ``armSyncPause()`` was called — after its commit's frames
/// are written, before the commit is published in the wal-index header — until ``resume()``.
/// (With `synchronous = FULL`, the sync sits between the two.)
enum PausingVFS {
    static let name = "ripple-test-pausing"
    /// Signaled when a sync paused; the pause lasts until ``resume()``.
    static let paused = DispatchSemaphore(value: 0)
    private static let resumed = DispatchSemaphore(value: 0)
    private static let armed = Locked(false)

    /// Pauses the next sync of a `-wal` file opened through this VFS.
    static func armSyncPause() { armed.withLock { $0 = true } }

    /// Ends the pause.
    static func resume() { resumed.signal() }

    /// A connection to the database at `path` through this VFS, `synchronous = FULL`.
    static func open(_ path: String) -> OpaquePointer? {
        _ = registered
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, name) == SQLITE_OK else { return nil }
        sqlite3_exec(handle, "PRAGMA synchronous = FULL", nil, nil, nil)
        return handle
    }

    // The wrapper's file: the base's pointer to its methods (ours), whether it is a -wal file,
    // then the base VFS's own file.
    private static let innerOffset = 16

    nonisolated(unsafe) private static var base: UnsafeMutablePointer<sqlite3_vfs>!
    nonisolated(unsafe) private static let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
    nonisolated(unsafe) private static let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
    nonisolated(unsafe) private static var methodsMade = false

    private static let registered: Void = {
        base = sqlite3_vfs_find(nil)
        vfs.initialize(to: base.pointee)
        vfs.pointee.pNext = nil
        vfs.pointee.szOsFile = Int32(innerOffset) + base.pointee.szOsFile
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.xOpen = { _, path, file, flags, outFlags in
            let inner = PausingVFS.inner(file)
            let code = PausingVFS.base.pointee.xOpen!(PausingVFS.base, path, inner, flags, outFlags)
            guard let file, let real = inner.pointee.pMethods else {
                file?.pointee.pMethods = nil
                return code
            }
            PausingVFS.makeMethods(like: real)
            UnsafeMutableRawPointer(file).advanced(by: 8).storeBytes(of: flags & SQLITE_OPEN_WAL != 0 ? 1 : 0, as: Int32.self)
            file.pointee.pMethods = UnsafePointer(PausingVFS.methods)
            return code
        }
        sqlite3_vfs_register(vfs, 0)
    }()

    private static func inner(_ file: UnsafeMutablePointer<sqlite3_file>?) -> UnsafeMutablePointer<sqlite3_file> {
        UnsafeMutableRawPointer(file!).advanced(by: innerOffset).assumingMemoryBound(to: sqlite3_file.self)
    }

    private static func real(_ file: UnsafeMutablePointer<sqlite3_file>?) -> sqlite3_io_methods {
        inner(file).pointee.pMethods!.pointee
    }

    private static func isWAL(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Bool {
        UnsafeMutableRawPointer(file!).advanced(by: 8).load(as: Int32.self) == 1
    }

    /// Every method forwards to the base file's; `xSync` of a -wal file may pause first.
    private static func makeMethods(like real: UnsafePointer<sqlite3_io_methods>) {
        guard !methodsMade else { return }
        methodsMade = true
        var m = sqlite3_io_methods()
        m.iVersion = real.pointee.iVersion
        m.xClose = { f in PausingVFS.real(f).xClose!(PausingVFS.inner(f)) }
        m.xRead = { f, buffer, count, offset in PausingVFS.real(f).xRead!(PausingVFS.inner(f), buffer, count, offset) }
        m.xWrite = { f, buffer, count, offset in PausingVFS.real(f).xWrite!(PausingVFS.inner(f), buffer, count, offset) }
        m.xTruncate = { f, size in PausingVFS.real(f).xTruncate!(PausingVFS.inner(f), size) }
        m.xSync = { f, flags in
            if PausingVFS.isWAL(f), PausingVFS.armed.withLock({ armed in defer { armed = false }; return armed }) {
                PausingVFS.paused.signal()
                _ = try? Wait.for(PausingVFS.resumed, "the test to resume the paused sync")
            }
            return PausingVFS.real(f).xSync!(PausingVFS.inner(f), flags)
        }
        m.xFileSize = { f, size in PausingVFS.real(f).xFileSize!(PausingVFS.inner(f), size) }
        m.xLock = { f, lock in PausingVFS.real(f).xLock!(PausingVFS.inner(f), lock) }
        m.xUnlock = { f, lock in PausingVFS.real(f).xUnlock!(PausingVFS.inner(f), lock) }
        m.xCheckReservedLock = { f, out in PausingVFS.real(f).xCheckReservedLock!(PausingVFS.inner(f), out) }
        m.xFileControl = { f, op, argument in PausingVFS.real(f).xFileControl!(PausingVFS.inner(f), op, argument) }
        m.xSectorSize = { f in PausingVFS.real(f).xSectorSize!(PausingVFS.inner(f)) }
        m.xDeviceCharacteristics = { f in PausingVFS.real(f).xDeviceCharacteristics!(PausingVFS.inner(f)) }
        m.xShmMap = { f, region, size, extend, out in PausingVFS.real(f).xShmMap!(PausingVFS.inner(f), region, size, extend, out) }
        m.xShmLock = { f, offset, count, flags in PausingVFS.real(f).xShmLock!(PausingVFS.inner(f), offset, count, flags) }
        m.xShmBarrier = { f in PausingVFS.real(f).xShmBarrier!(PausingVFS.inner(f)) }
        m.xShmUnmap = { f, delete in PausingVFS.real(f).xShmUnmap!(PausingVFS.inner(f), delete) }
        m.xFetch = { f, offset, count, out in PausingVFS.real(f).xFetch!(PausingVFS.inner(f), offset, count, out) }
        m.xUnfetch = { f, offset, pointer in PausingVFS.real(f).xUnfetch!(PausingVFS.inner(f), offset, pointer) }
        methods.initialize(to: m)
    }
}

/// A value handed to another thread that the test alone uses there (a raw connection).
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

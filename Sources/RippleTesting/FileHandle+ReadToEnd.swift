import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(Glibc)
private let systemRead = Glibc.read
#elseif canImport(Darwin)
private let systemRead = Darwin.read
#endif

extension FileHandle {
    /// Every byte until the end of the file (a pipe: until its writers close it), read again
    /// after a signal interrupts a read. (Foundation's `readDataToEndOfFile()` stops the process
    /// when a read is interrupted — `EINTR`, which a child's exit can cause while a test waits
    /// on its output.)
    package func readToEndRetryingInterrupts() -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let descriptor = fileDescriptor
        while true {
            let count = buffer.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count < 0, errno == EINTR {
                continue
            } else {
                return data
            }
        }
    }
}

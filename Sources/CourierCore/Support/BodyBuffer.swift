import CCourierSystem
import Foundation

/// The response body as libcurl's write callback delivers it: one growing malloc'd buffer,
/// handed to `Data` without a copy when the transfer completes (`Data(bytesNoCopy:)` with a
/// `free` deallocator). Engine thread only; not copyable, so ownership is explicit.
package struct BodyBuffer: ~Copyable {
    private var storage: UnsafeMutableRawPointer?
    private var capacity = 0
    package private(set) var count = 0

    package init() {}

    deinit {
        free(storage)
    }

    var isEmpty: Bool { count == 0 }

    /// Makes room for at least `minimumCapacity` bytes in all.
    package mutating func reserve(_ minimumCapacity: Int) {
        guard minimumCapacity > capacity else { return }
        guard let grown = realloc(storage, minimumCapacity) else { fatalError("out of memory") }
        storage = grown
        capacity = minimumCapacity
    }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        if count + bytes.count > capacity {
            reserve(Swift.max(count + bytes.count, capacity * 2, 1024))
        }
        courier_copy_bytes(storage! + count, source, bytes.count)
        count += bytes.count
    }

    /// The bytes so far, copied (for error reports; the transfer keeps its buffer).
    package func copiedData() -> Data {
        guard let storage else { return Data() }
        return Data(bytes: storage, count: count)
    }

    /// Moves the bytes into a `Data` without copying; the buffer is empty afterwards.
    package mutating func takeData() -> Data {
        guard let storage, count > 0 else { return Data() }
        let data = Data(bytesNoCopy: storage, count: count, deallocator: .free)
        self.storage = nil
        capacity = 0
        count = 0
        return data
    }
}

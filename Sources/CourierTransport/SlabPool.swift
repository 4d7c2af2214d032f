@_spi(CourierInternals) import CourierCore
import Foundation

/// The memory a byte stream's chunks live in: slabs of `size` bytes that the engine fills in
/// order and hands to the consumer in slices, each slice a `Data` that keeps its slab alive.
/// Once the consumer has let go of every slice of a slab, the slab's memory goes back to the
/// pool for the next bytes.
///
/// This spares the stream a `malloc` per chunk, and the `realloc` copies of a buffer growing
/// through a turn of the engine's loop, and it reuses memory that is mapped and warm in the
/// cache. Fresh buffers for every turn left a 1 GiB loopback stream at 38 to 41 MiB peak RSS;
/// slabs, at 33 to 35 MiB.
package final class SlabPool: @unchecked Sendable {
    /// The bytes in one slab.
    package static let size = 256 << 10

    private let spareLimit: Int
    // `@unchecked Sendable`: `spare` is only touched under its lock; the memory it points to
    // belongs to no slab.
    private let spare = Locked<[UnsafeMutableRawPointer]>([])

    /// A pool that keeps up to `spareLimit` idle slabs for reuse and frees any more.
    package init(spareLimit: Int) {
        self.spareLimit = spareLimit
    }

    /// A slab to fill: the idle one freed last (the warmest), or new memory.
    package func take() -> Slab {
        let reused = spare.withLock { $0.popLast() }
        return Slab(base: reused ?? .allocate(byteCount: Self.size, alignment: 64), pool: self)
    }

    /// A slab's memory is free again (its last slice was released, on any thread).
    fileprivate func recycle(_ base: UnsafeMutableRawPointer) {
        let kept = spare.withLock { spare -> Bool in
            guard spare.count < spareLimit else { return false }
            spare.append(base)
            return true
        }
        if !kept { base.deallocate() }
    }

    deinit {
        spare.withLock { spare in
            for base in spare { base.deallocate() }
            spare.removeAll()
        }
    }
}

/// One slab of a `SlabPool`. The engine writes into it; the slices it hands out share it.
///
/// `@unchecked Sendable`: the engine thread writes a range of bytes before it makes a slice of
/// that range, and never writes there again; slices only read.
package final class Slab: @unchecked Sendable {
    package let base: UnsafeMutableRawPointer
    private let pool: SlabPool

    fileprivate init(base: UnsafeMutableRawPointer, pool: SlabPool) {
        self.base = base
        self.pool = pool
    }

    /// The bytes in `range` as a `Data` without a copy; the slab lives as long as the `Data`.
    package func slice(_ range: Range<Int>) -> Data {
        Data(
            bytesNoCopy: base + range.lowerBound, count: range.count,
            deallocator: .custom { _, _ in withExtendedLifetime(self) {} })
    }

    deinit {
        pool.recycle(base)
    }
}

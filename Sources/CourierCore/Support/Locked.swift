import Foundation

/// A value guarded by a `pthread_mutex_t`, allocated together with the value.
///
/// Public only as SPI (`@_spi(CourierInternals) import CourierCore`), for Courier's own layers:
/// `package` declarations are not inlined across modules, and every layer takes this lock on
/// its hot path, so it must be specialized where it is used.
///
/// Courier uses this rather than `Synchronization.Mutex` because ThreadSanitizer intercepts
/// pthread mutexes: on Linux it does not see the futex-based `Mutex` lock and unlock, and
/// reports every access guarded by one as a race, which would hide real ones.
@_spi(CourierInternals) public struct Locked<Value> {
    @usableFromInline let buffer: LockedBuffer<Value>

    /// A lock around `value`.
    @inlinable
    public init(_ value: Value) {
        buffer = LockedBuffer.make(value)
    }

    /// Runs `body` with exclusive access to the value. Inlinable, so that callers in every
    /// layer get it specialized.
    @inlinable @inline(__always)
    public func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try buffer.withLock(body)
    }
}

// `@unchecked`: every access to the value goes through `withLock`, under the mutex.
extension Locked: @unchecked Sendable where Value: Sendable {}

/// The storage of `Locked`: the value as the header, one mutex as the element.
@_spi(CourierInternals) public final class LockedBuffer<Value>: ManagedBuffer<Value, pthread_mutex_t> {
    /// A buffer holding `value` and an initialized mutex.
    @inlinable
    public static func make(_ value: Value) -> LockedBuffer<Value> {
        let buffer = create(minimumCapacity: 1) { _ in value }
        buffer.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            _ = pthread_mutex_init(mutex, nil)
        }
        return unsafeDowncast(buffer, to: LockedBuffer<Value>.self)
    }

    /// Runs `body` with the value, the mutex held.
    @inlinable @inline(__always)
    public func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try withUnsafeMutablePointers { value, mutex throws(Failure) -> Result in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    // `ManagedBuffer` destroys the header (the value) itself; the elements are ours.
    deinit {
        withUnsafeMutablePointerToElements { mutex in
            _ = pthread_mutex_destroy(mutex)
            mutex.deinitialize(count: 1)
        }
    }
}

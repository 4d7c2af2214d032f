import CCurlShim
@_spi(CourierInternals) import CourierCore

/// A token bucket for a bandwidth limit: a transfer's own (engine thread), or the session's,
/// which every engine of the session takes from (`SessionBandwidth`, under a lock).
///
/// Tokens are bytes; they refill at `bytesPerSecond` up to a quarter second's worth. A
/// callback takes tokens for what it is about to pass on; when none are left it pauses its
/// transfer until `readyTime` (the balance may go below zero by one chunk, which keeps the
/// average exact without splitting chunks).
package struct BandwidthBucket: Sendable {
    private let rate: Double
    private let capacity: Double
    private var tokens: Double
    private var updated: UInt64

    init(bytesPerSecond: Int64) {
        rate = Double(max(1, bytesPerSecond))
        capacity = max(rate / 4, 16_384)
        tokens = 0
        updated = courier_monotonic_nanoseconds()
    }

    private mutating func refill() {
        let now = courier_monotonic_nanoseconds()
        tokens = min(capacity, tokens + Double(now &- updated) / 1e9 * rate)
        updated = now
    }

    /// Takes `count` bytes' worth if any tokens are left.
    mutating func take(_ count: Int) -> Bool {
        refill()
        guard tokens > 0 else { return false }
        tokens -= Double(count)
        return true
    }

    /// Gives back what was taken but not used.
    mutating func refund(_ count: Int) {
        tokens = min(capacity, tokens + Double(count))
    }

    /// When the balance will be positive again.
    mutating func readyTime() -> UInt64 {
        refill()
        let deficit = max(0, -tokens) + 1
        return updated + UInt64(deficit / rate * 1e9)
    }
}

/// The session's bandwidth limit, shared by its engines: one bucket under a lock.
package final class SessionBandwidth: Sendable {
    private let bucket: Locked<BandwidthBucket>

    init(bytesPerSecond: Int64) {
        bucket = Locked(BandwidthBucket(bytesPerSecond: bytesPerSecond))
    }

    /// Takes `count` bytes' worth if any tokens are left; otherwise nil and when to try again.
    func take(_ count: Int) -> UInt64? {
        bucket.withLock { $0.take(count) ? nil : $0.readyTime() }
    }

    func refund(_ count: Int) {
        bucket.withLock { $0.refund(count) }
    }
}

import CCurlShim
import Foundation
import Synchronization

/// What a session's engines share, whatever engine runs a transfer: TLS sessions and DNS
/// answers (libcurl share handles, each data kind behind a mutex of its own, as
/// `curl_share_setopt(3)` asks when several threads use one share), the cookies, and the
/// session's bandwidth limit.
///
/// An easy handle joins one share: a transfer that handles cookies joins the cookie engine's
/// (cookies, TLS sessions, DNS), any other joins `connections` (TLS sessions, DNS). The shares
/// are released when the last engine has ended (every easy handle has left them by then).
///
/// `@unchecked Sendable`: libcurl guards the shares' data with the locks; `CookieEngine` guards
/// its own handle; the rest is immutable or atomic.
package final class SessionShares: @unchecked Sendable {
    /// TLS sessions and DNS answers of the transfers that handle no cookies.
    let connections: UnsafeMutableRawPointer
    private let connectionLocks: ShareLocks
    /// The cookie engine, when the session handles cookies.
    let cookies: CookieEngine?
    /// The CA stores of the session's TLS connections.
    let caStores = CAStores()
    /// The session-wide bandwidth limit, when there is one.
    let bandwidth: SessionBandwidth?
    /// Engines still running; the last to end releases the shares.
    private let remaining: Atomic<Int>

    init(engineCount: Int, cookies: CurlEngine.CookieSettings?, maximumBytesPerSecond: Int64?) {
        connectionLocks = ShareLocks()
        connections = CurlRuntime.handle(curl_share_init)!
        connectionLocks.install(on: connections)
        courier_share_setopt_long(connections, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        courier_share_setopt_long(connections, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        self.cookies = cookies.map { CookieEngine(jar: $0.jar, policy: $0.policy, logger: $0.logger) }
        bandwidth = maximumBytesPerSecond.map(SessionBandwidth.init(bytesPerSecond:))
        remaining = Atomic(max(1, engineCount))
    }

    /// An engine ended (after `curl_multi_cleanup`): the last releases the shares.
    func engineEnded() {
        guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        cookies?.close()
        curl_share_cleanup(connections)
        connectionLocks.release()
        caStores.release()
    }
}

/// One mutex per kind of data a libcurl share holds, and the callbacks that take them.
final class ShareLocks: @unchecked Sendable {
    private let locks: UnsafeMutablePointer<pthread_mutex_t>
    private static let count = Int(CURL_LOCK_DATA_LAST.rawValue)

    init() {
        locks = .allocate(capacity: Self.count)
        for index in 0..<Self.count { pthread_mutex_init(locks + index, nil) }
    }

    /// Makes `share` take these locks.
    func install(on share: UnsafeMutableRawPointer) {
        courier_share_setopt_pointer(share, CURLSHOPT_USERDATA, locks)
        courier_share_setopt_lock_function(share, shareLockCallback)
        courier_share_setopt_unlock_function(share, shareUnlockCallback)
    }

    /// After the share is cleaned up.
    func release() {
        for index in 0..<Self.count { pthread_mutex_destroy(locks + index) }
        locks.deallocate()
    }
}

private let shareLockCallback: curl_lock_function = { _, data, _, userdata in
    let locks = userdata!.assumingMemoryBound(to: pthread_mutex_t.self)
    pthread_mutex_lock(locks + Int(data.rawValue))
}

private let shareUnlockCallback: curl_unlock_function = { _, data, userdata in
    let locks = userdata!.assumingMemoryBound(to: pthread_mutex_t.self)
    pthread_mutex_unlock(locks + Int(data.rawValue))
}

import CCourierSystem
@_spi(CourierInternals) import CourierCore
import Foundation

/// A network interface of the system, as the kernel names it.
public struct NetworkInterface: Sendable, Hashable, CustomStringConvertible {
    /// The interface's name, e.g. `eth0`, `wlan0` or `lo`.
    public var name: String
    /// The kernel's index of the interface.
    public var index: Int

    /// An interface with this name and index.
    public init(name: String, index: Int) {
        self.name = name
        self.index = index
    }

    /// Whether it is the loopback interface (`lo`).
    public var isLoopback: Bool { name == "lo" }

    /// The interface's name.
    public var description: String { name }
}

/// Whether a host can be reached: the system has a route to one of its addresses (and
/// through which interface), or none.
///
/// Reachable is not a promise that the server answers: it says the system would send the
/// packets somewhere. Unreachable is certain: a connection would fail at once.
public enum Reachability: Sendable, Hashable {
    /// The system has a route to the host, through this interface.
    case reachable(through: NetworkInterface)
    /// The system has no route to any of the host's addresses, or the name does not resolve.
    case unreachable

    /// Whether the host is reachable.
    public var isReachable: Bool {
        if case .reachable = self { return true }
        return false
    }
}

/// Watches the system's network paths to one host, as AFNetworking's reachability manager
/// does: the route the kernel would take to the host's addresses, looked up again whenever
/// a link, an address or a route changes (rtnetlink's change reports; nothing polls).
///
/// ```swift
/// let monitor = ReachabilityMonitor(host: "api.example.com")
/// for await status in monitor.statuses {
///     print(status)   // .reachable(through: eth0), then .unreachable when the link goes down
/// }
/// ```
///
/// `HTTPSessionManager.reachability` is one for the base URL's host. Names are resolved with
/// the system's resolver each time the paths change; a name that does not resolve counts as
/// unreachable.
public final class ReachabilityMonitor: Sendable {
    /// The host watched: a name (in the form Courier compares hosts in: lower case, IDNA as
    /// Punycode, no trailing dot), or an IPv4 or IPv6 address (without brackets).
    public let host: String

    /// A monitor of the paths to `host`.
    public init(host: String) {
        self.host = HostName.normalized(host)
    }

    /// A monitor of the paths to the URL's host; nil when the URL has none.
    public convenience init?(url: URL) {
        guard let host = url.host, !host.isEmpty else { return nil }
        self.init(host: host)
    }

    /// The host's reachability now.
    public func currentStatus() async -> Reachability {
        Self.status(of: host)
    }

    /// The host's reachability now, then each time it changes: a new interface, or reachable
    /// and unreachable in turn. It ends when the task iterating it is cancelled.
    public var statuses: AsyncStream<Reachability> {
        let host = self.host
        return AsyncStream(bufferingPolicy: .bufferingNewest(8)) { continuation in
            let (id, changes) = PathEvents.shared.subscribe()
            let task = Task {
                var last = Self.status(of: host)
                continuation.yield(last)
                for await _ in changes {
                    let now = Self.status(of: host)
                    if now != last {
                        last = now
                        continuation.yield(now)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                PathEvents.shared.unsubscribe(id)
            }
        }
    }

    /// Returns the interface once the host is reachable (at once if it is). Throws
    /// `CancellationError` when the calling task is cancelled.
    @discardableResult
    public func waitUntilReachable() async throws -> NetworkInterface {
        for await status in statuses {
            if case .reachable(let interface) = status { return interface }
        }
        try Task.checkCancellation()
        throw CancellationError()
    }

    /// The route to `host`: through the interface the kernel would use for its first address
    /// that has one.
    static func status(of host: String) -> Reachability {
        for (family, address) in addresses(of: host) {
            var index: Int32 = 0
            let found = address.withUnsafeBytes { courier_route_lookup(family, $0.baseAddress, &index) }
            guard found == 0 else { continue }
            return .reachable(through: NetworkInterface(name: interfaceName(Int(index)), index: Int(index)))
        }
        return .unreachable
    }

    /// The host's addresses: the literal itself, or what the resolver answers.
    private static func addresses(of host: String) -> [(Int32, [UInt8])] {
        var v4 = [UInt8](repeating: 0, count: 4)
        if inet_pton(AF_INET, host, &v4) == 1 { return [(AF_INET, v4)] }
        var v6 = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET6, host, &v6) == 1 { return [(AF_INET6, v6)] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var found: [(Int32, [UInt8])] = []
        var entry = list
        while let info = entry?.pointee, let address = info.ai_addr {
            if info.ai_family == AF_INET {
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    var bytes = pointer.pointee.sin_addr
                    found.append((AF_INET, withUnsafeBytes(of: &bytes) { Array($0) }))
                }
            } else if info.ai_family == AF_INET6 {
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var bytes = pointer.pointee.sin6_addr
                    found.append((AF_INET6, withUnsafeBytes(of: &bytes) { Array($0) }))
                }
            }
            entry = info.ai_next
        }
        return found
    }

    private static func interfaceName(_ index: Int) -> String {
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(UInt32(index), &name) != nil else { return "" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The kernel's reports of link, address and route changes, read on one thread for the whole
/// process (started by the first subscriber) and passed to every subscriber as a nudge to
/// look again.
final class PathEvents: Sendable {
    static let shared = PathEvents()

    private struct State {
        var socket: Int32?
        var nextID: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<Void>.Continuation] = [:]
    }

    private let state = Locked(State())

    /// A stream of nudges, one (coalesced) after each batch of reports; the socket is opened
    /// before this returns, so no change after it is missed. Without netlink (a sandbox that
    /// refuses the socket) the stream never yields.
    func subscribe() -> (UInt64, AsyncStream<Void>) {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let (id, start) = state.withLock { state -> (UInt64, Int32?) in
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            guard state.socket == nil else { return (state.nextID, nil) }
            let socket = courier_path_events_open()
            state.socket = socket
            return (state.nextID, socket >= 0 ? socket : nil)
        }
        if let start {
            let thread = Thread { [self] in self.read(start) }
            thread.name = "courier-paths"
            thread.start()
        }
        return (id, stream)
    }

    func unsubscribe(_ id: UInt64) {
        state.withLock { $0.subscribers.removeValue(forKey: id) }?.finish()
    }

    /// Waits for reports for as long as the process runs.
    private func read(_ socket: Int32) {
        while courier_path_events_wait(socket) >= 0 {
            let subscribers = state.withLock { Array($0.subscribers.values) }
            for subscriber in subscribers { subscriber.yield() }
        }
    }
}

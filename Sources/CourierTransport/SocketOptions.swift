import Foundation

/// How a session's (or one request's) connections are opened: where they are sent from, over
/// which IP version, and what the kernel is asked to do with an idle or stalled connection.
///
/// ```swift
/// var configuration = HTTPSessionConfiguration.default
/// configuration.socket.source = .address("10.0.0.7")           // send from this address
/// configuration.socket.keepAlive = .init(idle: .seconds(30), interval: .seconds(10))
/// configuration.socket.userTimeout = .seconds(20)              // unacknowledged data: give up
/// ```
///
/// They apply to connections as they are opened. A request with a ``source`` is only sent on a
/// connection from that source (libcurl matches them); the other options do not keep a request
/// off a connection to its server that was opened with different ones.
public struct SocketOptions: Sendable, Hashable {
    /// Where a connection is sent from.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum Source: Sendable, Hashable {
        /// A local IP address of this machine (`"10.0.0.7"`, `"::1"`, `"127.0.0.2"`): the
        /// socket is bound to it before it connects.
        case address(String)
        /// A network interface by name (`"eth1"`): the socket is bound to the interface
        /// (`SO_BINDTODEVICE`, which needs `CAP_NET_RAW` unless the kernel allows it to all),
        /// so it leaves through that interface whatever the routing table says.
        case interface(String)
    }

    /// Which IP version a host name's addresses are taken from.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum AddressFamily: Sendable, Hashable {
        /// Both, as the resolver returns them (IPv6 and IPv4 raced, "happy eyeballs").
        case any
        /// IPv4 addresses only.
        case ipv4
        /// IPv6 addresses only.
        case ipv6
    }

    /// TCP keep-alive probes on an idle connection: the kernel notices a peer or a middlebox
    /// that went away without a word, and keeps a NAT mapping alive.
    public struct KeepAlive: Sendable, Hashable {
        /// How long a connection is idle before the first probe (whole seconds, at least one).
        public var idle: Duration
        /// The time between probes (whole seconds, at least one).
        public var interval: Duration

        /// Probes after `idle`, then every `interval`.
        public init(idle: Duration = .seconds(60), interval: Duration = .seconds(60)) {
            self.idle = idle
            self.interval = interval
        }
    }

    /// Where connections are sent from; nil (the default): wherever the routing table says.
    public var source: Source?
    /// The IP version of the addresses connected to. Default `.any`.
    public var addressFamily: AddressFamily = .any
    /// TCP keep-alive probes; nil (the default): none, as the kernel's default is.
    public var keepAlive: KeepAlive?
    /// `TCP_USER_TIMEOUT`: a connection whose sent data stays unacknowledged this long is
    /// ended by the kernel (milliseconds, at least one), so a request fails within that time
    /// after a peer vanishes mid-transfer rather than after the kernel's retransmissions
    /// (about 15 minutes). nil (the default): the kernel's.
    public var userTimeout: Duration?
    /// Multipath TCP (RFC 8684, `IPPROTO_MPTCP`): a connection that can use several paths
    /// at once and survive the loss of one, where the kernel has it (Linux 5.6 and newer,
    /// with `net.mptcp.enabled`) and the server speaks it; a plain TCP connection otherwise,
    /// which is also what an MPTCP connection to a server without it becomes. Default false.
    public var multipath = false

    /// The defaults: the routing table's source, either IP version, the kernel's timers.
    public init() {}
}

extension SocketOptions {
    /// Whether opening the socket itself is asked for something (MPTCP, the user timeout).
    package var opensItself: Bool { multipath || userTimeout != nil }
}

extension SocketOptions.Source {
    /// What is wrong with the source, before anything is sent: an address that is not an IP
    /// address, an interface this machine does not have, or a name of each kind at once (an
    /// interface named like an address). nil when it is usable as it says.
    package var problem: String? {
        switch self {
        case .address(let text):
            guard Self.isIPAddress(text) else { return "The source address '\(text)' is not an IPv4 or IPv6 address" }
            return if_nametoindex(text) == 0 ? nil : "The source address '\(text)' is also an interface's name"
        case .interface(let name):
            guard !name.isEmpty, if_nametoindex(name) != 0 else {
                return "This machine has no network interface named '\(name)'"
            }
            return nil
        }
    }

    /// Whether this is an address and the text an IPv4 or IPv6 address.
    package var isValidAddress: Bool {
        if case .address(let text) = self { return Self.isIPAddress(text) }
        return false
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

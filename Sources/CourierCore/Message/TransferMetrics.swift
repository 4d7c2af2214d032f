import Foundation

/// Timing and size figures for one transfer, from libcurl's `curl_easy_getinfo` (see
/// CURLINFO_TOTAL_TIME_T and friends). Times are from the start of the final hop, except
/// `totalDuration`, which adds the hops before it when redirects were followed.
public struct TransferMetrics: Sendable, Hashable {
    /// Time until the name was resolved.
    public var nameLookup: Duration = .zero
    /// Time until the TCP connection was made (zero when an existing one was reused).
    public var connect: Duration = .zero
    /// Time until the TLS handshake finished (zero for plain HTTP).
    public var tlsHandshake: Duration = .zero
    /// Time until the first response byte arrived.
    public var firstByte: Duration = .zero
    /// Time for the whole transfer, every redirect hop included.
    public var totalDuration: Duration = .zero
    /// Response body bytes received on the final hop (before content decoding).
    public var bytesReceived: Int64 = 0
    /// Request body bytes sent on the final hop.
    public var bytesSent: Int64 = 0
    /// Redirects followed.
    public var redirectCount: Int = 0
    /// The HTTP version used: `1.0`, `1.1`, `2` or `3`.
    public var httpVersion: String = ""
    /// The peer's IP address, e.g. `127.0.0.1`.
    public var remoteIP: String = ""
    /// The peer's port.
    public var remotePort: Int = 0
    /// The peer's address and port, e.g. `127.0.0.1:8080` (`[::1]:8080` for IPv6).
    public var remoteAddress: String {
        remoteIP.contains(":") ? "[\(remoteIP)]:\(remotePort)" : "\(remoteIP):\(remotePort)"
    }
    /// Whether the final hop reused an open connection.
    public var reusedConnection: Bool = false
    /// The local port of the connection: requests that share a connection (HTTP/1.1
    /// keep-alive, HTTP/2 streams) share it. Zero for a Unix-domain socket.
    public var localPort: Int = 0

    /// Empty metrics (all zero), for responses that did not come from the network.
    public init() {}
}

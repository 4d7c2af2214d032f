import Foundation
import HTTPTypes

/// Timing and size figures for one transfer, from libcurl's `curl_easy_getinfo` (see
/// CURLINFO_TOTAL_TIME_T and friends). Times are from the start of the final hop, except
/// `totalDuration`, which adds the hops before it when redirects were followed.
///
/// `transactions` has one record per request that went out for the call, in order: every
/// redirect hop, the second request that answered an authentication challenge, and every
/// retry attempt (including the failed ones), as URLSession's transaction metrics have.
public struct TransferMetrics: Sendable, Hashable {
    // The figures live in a box shared by copies until one of them changes (copy on write):
    // metrics travel in every response (`RawResponse`, `DataResponse`) through the async
    // functions that wait for it, and each of their frames would otherwise hold room for all
    // of them (about 200 bytes) for as long as the request lives. `init()` shares one box.
    private var storage: Storage

    private final class Storage: @unchecked Sendable {
        // Changed only through `TransferMetrics.unique()`, when no other value shares the box.
        // Not checked for exclusive access at run time: a box is written only while no other
        // value shares it (above), so no read of it can overlap a write, and each read of a
        // field would otherwise cost the runtime a check (several per request).
        @exclusivity(unchecked) var fields: Fields

        init(_ fields: Fields) {
            self.fields = fields
        }

        /// The box of `init()`.
        static let empty = Storage(Fields())
    }

    /// The fields, as a value: a new box copies them at once.
    private struct Fields {
        var nameLookup: Duration = .zero
        var connect: Duration = .zero
        var tlsHandshake: Duration = .zero
        var firstByte: Duration = .zero
        var totalDuration: Duration = .zero
        var bytesReceived: Int64 = 0
        var bytesSent: Int64 = 0
        var redirectCount: Int = 0
        var httpVersion: String = ""
        var remoteIP: String = ""
        var remotePort: Int = 0
        var reusedConnection: Bool = false
        var localPort: Int = 0
        var storedTransactions: [TransactionMetrics] = []
        var coalescedFrom: UInt64? = nil
    }

    /// The box, made this value's own first if another value shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    // `transactions` is the stored ones followed by the final one, which is built when it is
    // read from the figures below and the request and head of the response (`final`): a
    // request with one hop stores no array, and its head is not parsed for the record.
    /// The number of the call whose transfer answered this one, when the call waited for an
    /// identical call's request instead of sending its own (request coalescing: the figures are
    /// that transfer's); nil when the call sent its own. Calls are numbered as `RequestContext`
    /// and event monitors number them.
    public var coalescedFrom: UInt64? {
        get { storage.fields.coalescedFrom }
        set { unique().fields.coalescedFrom = newValue }
    }

    /// Time until the name was resolved.
    public var nameLookup: Duration {
        get { storage.fields.nameLookup }
        set { unique().fields.nameLookup = newValue }
    }
    /// Time until the TCP connection was made (zero when an existing one was reused).
    public var connect: Duration {
        get { storage.fields.connect }
        set { unique().fields.connect = newValue }
    }
    /// Time until the TLS handshake finished (zero for plain HTTP).
    public var tlsHandshake: Duration {
        get { storage.fields.tlsHandshake }
        set { unique().fields.tlsHandshake = newValue }
    }
    /// Time until the first response byte arrived.
    public var firstByte: Duration {
        get { storage.fields.firstByte }
        set { unique().fields.firstByte = newValue }
    }
    /// Time for the whole transfer, every redirect hop included.
    public var totalDuration: Duration {
        get { storage.fields.totalDuration }
        set { unique().fields.totalDuration = newValue }
    }
    /// Response body bytes received on the final hop (before content decoding).
    public var bytesReceived: Int64 {
        get { storage.fields.bytesReceived }
        set { unique().fields.bytesReceived = newValue }
    }
    /// Request body bytes sent on the final hop.
    public var bytesSent: Int64 {
        get { storage.fields.bytesSent }
        set { unique().fields.bytesSent = newValue }
    }
    /// Redirects followed.
    public var redirectCount: Int {
        get { storage.fields.redirectCount }
        set { unique().fields.redirectCount = newValue }
    }
    /// The HTTP version used: `1.0`, `1.1`, `2` or `3`.
    public var httpVersion: String {
        get { storage.fields.httpVersion }
        set { unique().fields.httpVersion = newValue }
    }
    /// The peer's IP address, e.g. `127.0.0.1`.
    public var remoteIP: String {
        get { storage.fields.remoteIP }
        set { unique().fields.remoteIP = newValue }
    }
    /// The peer's port.
    public var remotePort: Int {
        get { storage.fields.remotePort }
        set { unique().fields.remotePort = newValue }
    }
    /// The peer's address and port, e.g. `127.0.0.1:8080` (`[::1]:8080` for IPv6).
    public var remoteAddress: String {
        remoteIP.contains(":") ? "[\(remoteIP)]:\(remotePort)" : "\(remoteIP):\(remotePort)"
    }
    /// Whether the final hop reused an open connection.
    public var reusedConnection: Bool {
        get { storage.fields.reusedConnection }
        set { unique().fields.reusedConnection = newValue }
    }
    /// The local port of the connection: requests that share a connection (HTTP/1.1
    /// keep-alive, HTTP/2 streams) share it. Zero for a Unix-domain socket.
    public var localPort: Int {
        get { storage.fields.localPort }
        set { unique().fields.localPort = newValue }
    }

    /// Every request that went out for the call (or the cache's answer), oldest first; the
    /// figures above are the last one's. Empty for metrics made with `init()`.
    public var transactions: [TransactionMetrics] {
        get {
            guard let final else { return storedTransactions }
            var last = TransactionMetrics(request: final.request, response: final.head.response)
            last.nameLookup = nameLookup
            last.connect = connect
            last.tlsHandshake = tlsHandshake
            last.firstByte = firstByte
            last.duration = totalDuration - storedTransactions.reduce(.zero) { $0 + $1.duration }
            last.bytesReceived = bytesReceived
            last.bytesSent = bytesSent
            last.httpVersion = httpVersion
            last.remoteIP = remoteIP
            last.remotePort = remotePort
            last.localPort = localPort
            last.reusedConnection = reusedConnection
            return storedTransactions + [last]
        }
        set {
            storedTransactions = newValue
            final = nil
        }
    }

    /// The transactions before the final one, or all of them when `final` is nil.
    package var storedTransactions: [TransactionMetrics] {
        get { storage.fields.storedTransactions }
        set { unique().fields.storedTransactions = newValue }
    }

    /// The request and response head of the final transaction, whose figures are the ones
    /// above (set for a response from a transport).
    package var final: FinalTransaction?

    /// The request and head of a transfer's final hop.
    package struct FinalTransaction: Sendable {
        package var request: HTTPRequest
        package var head: ResponseHead

        package init(request: HTTPRequest, head: ResponseHead) {
            self.request = request
            self.head = head
        }
    }

    /// Whether two metrics have the same figures and transactions.
    public static func == (lhs: TransferMetrics, rhs: TransferMetrics) -> Bool {
        lhs.nameLookup == rhs.nameLookup && lhs.connect == rhs.connect && lhs.tlsHandshake == rhs.tlsHandshake
            && lhs.firstByte == rhs.firstByte && lhs.totalDuration == rhs.totalDuration
            && lhs.bytesReceived == rhs.bytesReceived && lhs.bytesSent == rhs.bytesSent
            && lhs.redirectCount == rhs.redirectCount && lhs.httpVersion == rhs.httpVersion
            && lhs.remoteIP == rhs.remoteIP && lhs.remotePort == rhs.remotePort
            && lhs.reusedConnection == rhs.reusedConnection && lhs.localPort == rhs.localPort
            && lhs.transactions == rhs.transactions && lhs.coalescedFrom == rhs.coalescedFrom
    }

    /// Hashes the figures and the transactions.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(totalDuration)
        hasher.combine(bytesReceived)
        hasher.combine(bytesSent)
        hasher.combine(redirectCount)
        hasher.combine(remotePort)
        hasher.combine(localPort)
        hasher.combine(transactions)
    }

    /// Empty metrics (all zero), for responses that did not come from the network.
    public init() {
        storage = .empty
    }

    /// Metrics of one transfer: the figures of its last transaction (the final hop), the
    /// durations of all of them (its redirect hops) added up, and `redirectCount` hops before
    /// the last.
    public init(transactions: [TransactionMetrics], redirectCount: Int) {
        self.init(figuresOf: transactions.last, after: transactions.dropLast(), redirectCount: redirectCount)
        storedTransactions = transactions
    }

    /// Metrics with the figures of `last` (the final hop, whose request and response are set
    /// later in `final`), after the transactions `earlier` (its redirect hops), whose
    /// durations `totalDuration` adds to the last one's.
    package init(
        figuresOf last: TransactionMetrics?, after earlier: ArraySlice<TransactionMetrics> = [], redirectCount: Int
    ) {
        // The fields made here, then one new box.
        var fields = Fields()
        fields.redirectCount = redirectCount
        fields.storedTransactions = Array(earlier)
        for transaction in earlier { fields.totalDuration += transaction.duration }
        if let last {
            fields.nameLookup = last.nameLookup
            fields.connect = last.connect
            fields.tlsHandshake = last.tlsHandshake
            fields.firstByte = last.firstByte
            fields.bytesReceived = last.bytesReceived
            fields.bytesSent = last.bytesSent
            fields.httpVersion = last.httpVersion
            fields.remoteIP = last.remoteIP
            fields.remotePort = last.remotePort
            fields.reusedConnection = last.reusedConnection
            fields.localPort = last.localPort
            fields.totalDuration += last.duration
        }
        storage = Storage(fields)
    }
}

/// One request that went out for a call, and what came of it: a redirect hop, a retry
/// attempt, the second request after an authentication challenge, or the cache's answer.
public struct TransactionMetrics: Sendable, Hashable {
    /// Where a transaction's response came from.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum Source: Sendable, Hashable {
        /// The network.
        case network
        /// The HTTP cache, without a request.
        case cache
    }

    /// The request as it was sent (after interceptors, with the cache's conditional fields).
    public var request: HTTPRequest
    /// The response head, or nil when the transaction failed before one arrived.
    public var response: HTTPResponse?
    /// Where the response came from.
    public var source: Source = .network
    /// The attempt it belongs to: 1, then 2 and on for each retry.
    public var attempt: Int = 1
    /// Why it failed, when it did (the error's description).
    public var failure: String?
    /// Time until the name was resolved.
    public var nameLookup: Duration = .zero
    /// Time until the TCP connection was made (zero when an open one was reused).
    public var connect: Duration = .zero
    /// Time until the TLS handshake finished (zero for plain HTTP).
    public var tlsHandshake: Duration = .zero
    /// Time until the first response byte arrived.
    public var firstByte: Duration = .zero
    /// Time for the whole transaction.
    public var duration: Duration = .zero
    /// Response body bytes received (before content decoding).
    public var bytesReceived: Int64 = 0
    /// Request body bytes sent.
    public var bytesSent: Int64 = 0
    /// The HTTP version used: `1.0`, `1.1`, `2` or `3` (empty when nothing was received).
    public var httpVersion: String = ""
    /// The peer's IP address.
    public var remoteIP: String = ""
    /// The peer's port.
    public var remotePort: Int = 0
    /// The local port of the connection (zero for a Unix-domain socket).
    public var localPort: Int = 0
    /// Whether an open connection was reused.
    public var reusedConnection: Bool = false

    /// A transaction of `request`, with its response when one arrived.
    public init(request: HTTPRequest, response: HTTPResponse?) {
        self.request = request
        self.response = response
    }
}

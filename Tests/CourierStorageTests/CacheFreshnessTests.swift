import CourierStorage
import Foundation
import HTTPTypes
import Testing

/// A stored response's freshness (RFC 9111 section 4.2) at chosen instants: explicit
/// lifetimes, `Expires` against `Date`, the heuristic one, `Age`, the request's directives;
/// and what storing and a `304` do to its fields.
@Suite struct CacheFreshnessTests {
    /// When the response was received (and requested: no delay).
    static let received = Date(timeIntervalSince1970: 1_700_000_000)

    static func entry(
        _ fields: HTTPFields, status: HTTPResponse.Status = .ok, request: HTTPRequest = request(),
        lifetime: Duration? = nil
    ) -> CachedResponse {
        CachedResponse(
            key: "GET https://api.example.com/doc", response: HTTPResponse(status: status, headerFields: fields),
            body: Data("body".utf8), request: request, requestTime: received, responseTime: received,
            lifetimeOverride: lifetime)
    }

    static func request(_ fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/doc", headerFields: fields)
    }

    static func after(_ seconds: TimeInterval) -> Date { received.addingTimeInterval(seconds) }

    /// An HTTP date `seconds` after `received`.
    static func date(_ seconds: TimeInterval) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: after(seconds))
    }

    @Test func maxAgeIsTheLifetime() {
        let entry = Self.entry([.cacheControl: "max-age=60"])
        #expect(entry.isFresh(now: Self.after(59)))
        #expect(!entry.isFresh(now: Self.after(61)))
        #expect(entry.staleness(now: Self.after(70)) == 10)
        #expect(entry.currentAge(now: Self.after(20)) == 20)
    }

    @Test func anAgeTheResponseArrivedWithCounts() {
        let entry = Self.entry([.cacheControl: "max-age=60", .age: "50"])
        #expect(entry.currentAge(now: Self.after(5)) == 55)
        #expect(entry.isFresh(now: Self.after(5)))
        #expect(!entry.isFresh(now: Self.after(11)))
    }

    @Test func expiresCountsFromTheResponsesDate() {
        // The server's clock is an hour ahead: Expires, two minutes after its Date, is read
        // against Date, not against this machine's clock.
        let entry = Self.entry([.date: Self.date(3600), .expires: Self.date(3600 + 120)])
        #expect(entry.isFresh(now: Self.after(60)))
        #expect(!entry.isFresh(now: Self.after(180)))
        // max-age wins over Expires.
        #expect(!Self.entry([.cacheControl: "max-age=0", .expires: Self.date(600)]).isFresh(now: Self.after(1)))
    }

    @Test func anInvalidOrRepeatedExpiresMeansExpired() {
        #expect(!Self.entry([.expires: "0"]).isFresh(now: Self.after(1)))
        #expect(!Self.entry([.expires: "tomorrow"]).isFresh(now: Self.after(1)))
        var fields: HTTPFields = [.expires: Self.date(600)]
        fields.append(HTTPField(name: .expires, value: Self.date(900)))
        #expect(!Self.entry(fields).isFresh(now: Self.after(1)))
    }

    @Test func withoutExplicitFreshnessATenthOfTheTimeSinceLastModified() {
        let entry = Self.entry([.date: Self.date(0), .lastModified: Self.date(-10 * 86_400)])
        #expect(entry.isFresh(now: Self.after(86_400 - 60)))
        #expect(!entry.isFresh(now: Self.after(86_400 + 60)))
        // Only for the statuses that may be cached that way.
        let created = Self.entry([.date: Self.date(0), .lastModified: Self.date(-10 * 86_400)], status: .created)
        #expect(!created.isFresh(now: Self.after(1)))
        // Nothing at all: stale at once.
        #expect(!Self.entry([:]).isFresh(now: Self.after(1)))
    }

    @Test func aLifetimeTheCallerGaveOverridesTheHeaders() {
        let entry = Self.entry([.cacheControl: "max-age=0"], lifetime: .seconds(30))
        #expect(entry.isFresh(now: Self.after(29)))
        #expect(!entry.isFresh(now: Self.after(31)))
    }

    @Test func noCacheIsNeverFresh() {
        #expect(!Self.entry([.cacheControl: "no-cache, max-age=600"]).isFresh(now: Self.after(1)))
    }

    @Test func theRequestsDirectivesMoveTheLine() {
        let entry = Self.entry([.cacheControl: "max-age=60"])
        let at30 = Self.after(30)
        #expect(entry.isUsable(for: CacheControl([]), now: at30))
        #expect(!entry.isUsable(for: CacheControl(["max-age=20"]), now: at30))
        #expect(!entry.isUsable(for: CacheControl(["max-age=0"]), now: at30))
        #expect(!entry.isUsable(for: CacheControl(["min-fresh=40"]), now: at30))
        #expect(entry.isUsable(for: CacheControl(["min-fresh=20"]), now: at30))
        let at90 = Self.after(90)
        #expect(entry.isUsable(for: CacheControl(["max-stale=60"]), now: at90))
        #expect(!entry.isUsable(for: CacheControl(["max-stale=10"]), now: at90))
        #expect(entry.isUsable(for: CacheControl(["max-stale"]), now: at90))
        let strict = Self.entry([.cacheControl: "max-age=60, must-revalidate"])
        #expect(!strict.isUsable(for: CacheControl(["max-stale"]), now: at90))
    }

    @Test func varyComparesTheNamedRequestFields() {
        let entry = Self.entry(
            [.cacheControl: "max-age=60", .vary: "Accept-Language, X-Flavour"],
            request: Self.request([.acceptLanguage: "de", HTTPField.Name("X-Flavour")!: "oat"]))
        #expect(entry.matchesVary(Self.request([.acceptLanguage: "de", HTTPField.Name("X-Flavour")!: "oat"])))
        #expect(!entry.matchesVary(Self.request([.acceptLanguage: "en", HTTPField.Name("X-Flavour")!: "oat"])))
        #expect(!entry.matchesVary(Self.request([.acceptLanguage: "de"])))
        // A field the first request did not send must be absent again.
        let absent = Self.entry([.vary: "X-Flavour"])
        #expect(absent.matchesVary(Self.request()))
        #expect(!absent.matchesVary(Self.request([HTTPField.Name("X-Flavour")!: "rye"])))
    }

    @Test func a304ReplacesTheFieldsItCarries() {
        var entry = Self.entry([.cacheControl: "max-age=0", .eTag: #""v1""#, .contentType: "text/plain"])
        let later = Self.after(100)
        entry.update(
            with: HTTPResponse(
                status: .notModified,
                headerFields: [.cacheControl: "max-age=60", .contentLength: "0", .connection: "close"]),
            requestTime: later, responseTime: later)
        #expect(entry.response.headerFields[.cacheControl] == "max-age=60")
        #expect(entry.response.headerFields[.contentType] == "text/plain")
        #expect(entry.response.headerFields[.eTag] == #""v1""#)
        #expect(entry.response.headerFields[.contentLength] == nil)  // the 304's own length is not the body's
        #expect(entry.response.headerFields[.connection] == nil)
        #expect(entry.response.status == .ok)
        #expect(entry.isFresh(now: Self.after(150)))
    }

    @Test func storingLeavesOutHopByHopFieldsAndTheOnesTheDirectivesName() {
        let response = HTTPResponse(
            status: .ok,
            headerFields: [
                .connection: "X-Private-Hop", HTTPField.Name("X-Private-Hop")!: "1", .transferEncoding: "chunked",
                HTTPField.Name("Keep-Alive")!: "timeout=5", .setCookie: "a=1", .contentType: "text/plain",
            ])
        let stored = CachedResponse.storedHead(of: response, control: CacheControl([#"no-cache="Set-Cookie""#]))
        #expect(stored.headerFields.map(\.name.canonicalName) == ["content-type"])
        #expect(stored.status == .ok)
    }
}

/// `Strict-Transport-Security` as the store keeps it: which hosts are upgraded to https.
@Suite struct HSTSStoreTests {
    @Test func aHostThatAskedIsUpgradedAndOnlyIt() {
        let store = HSTSStore(file: nil)
        #expect(store.isEmpty)
        store.record("max-age=600", host: "Secure.Example.com")
        #expect(!store.isEmpty)
        #expect(
            store.upgrade(URL(string: "http://secure.example.com/a?b=1")!)?.absoluteString
                == "https://secure.example.com/a?b=1")
        #expect(
            store.upgrade(URL(string: "http://secure.example.com:80/a")!)?.absoluteString
                == "https://secure.example.com/a")
        #expect(
            store.upgrade(URL(string: "http://secure.example.com:8080/a")!)?.absoluteString
                == "https://secure.example.com:8080/a")
        #expect(store.upgrade(URL(string: "http://www.secure.example.com/")!) == nil)  // no includeSubDomains
        #expect(store.upgrade(URL(string: "http://example.com/")!) == nil)
        #expect(store.upgrade(URL(string: "https://secure.example.com/")!) == nil)  // already https
    }

    @Test func includeSubDomainsCoversTheSubdomains() {
        let store = HSTSStore(file: nil)
        store.record("max-age=600; includeSubDomains", host: "example.com")
        #expect(store.upgrade(URL(string: "http://a.b.example.com/")!) != nil)
        #expect(store.upgrade(URL(string: "http://badexample.com/")!) == nil)
    }

    @Test func maxAgeZeroForgetsTheHost() {
        let store = HSTSStore(file: nil)
        store.record("max-age=600", host: "example.com")
        store.record("max-age=0", host: "example.com")
        #expect(store.upgrade(URL(string: "http://example.com/")!) == nil)
    }

    @Test(arguments: ["", "includeSubDomains", "max-age=abc", "max-age=-1", "max-age=5; max-age=6", "max-age"])
    func aHeaderWithoutAValidMaxAgeIsIgnored(header: String) {
        let store = HSTSStore(file: nil)
        store.record(header, host: "example.com")
        #expect(store.isEmpty)
    }

    @Test func anIPAddressIsNeverRecorded() {
        let store = HSTSStore(file: nil)
        store.record("max-age=600", host: "127.0.0.1")
        #expect(store.upgrade(URL(string: "http://127.0.0.1/")!) == nil)
    }

    @Test func aQuotedMaxAgeCounts() {
        let store = HSTSStore(file: nil)
        store.record(#"MAX-AGE="600""#, host: "example.com")
        #expect(store.upgrade(URL(string: "http://example.com/")!) != nil)
    }
}

import Courier
@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

/// `RequestOptions` and `TransferMetrics` keep their fields in a box shared between copies
/// (copy on write): each copy must still behave as a value of its own, whichever copy changes
/// first, and a value made with every default must equal one set field by field.
@Suite struct ValueSemanticsTests {
    @Test func aCopyOfRequestOptionsChangesAlone() {
        let original = RequestOptions(requestTimeout: .seconds(5), priority: .high)
        var copy = original
        copy.requestTimeout = .seconds(9)
        copy.httpVersion = .http1_1
        copy.interceptors = [Interceptor(adapt: { request, _ in request })]
        #expect(original.requestTimeout == .seconds(5))
        #expect(original.httpVersion == nil)
        #expect(original.interceptors.isEmpty)
        #expect(original.priority == .high)
        #expect(copy.requestTimeout == .seconds(9))
        #expect(copy.httpVersion == .http1_1)
        #expect(copy.interceptors.count == 1)
        #expect(copy.priority == .high)

        // The original changed after a copy leaves the copy as it was.
        var first = RequestOptions()
        let second = first
        first.handlesCookies = false
        first.unixSocketPath = "/tmp/x.sock"
        #expect(second.handlesCookies == nil)
        #expect(second.unixSocketPath == nil)
        #expect(first.handlesCookies == false)
        #expect(first.unixSocketPath == "/tmp/x.sock")
    }

    @Test func defaultRequestOptionsAreIndependent() {
        // Every `RequestOptions()` shares one box: changing one must not reach the next.
        var changed = RequestOptions()
        changed.resourceTimeout = .seconds(1)
        changed.waitsForConnectivity = true
        changed.redirects = .doNotFollow
        let fresh = RequestOptions()
        #expect(fresh.resourceTimeout == nil)
        #expect(fresh.waitsForConnectivity == nil)
        #expect(fresh.redirects == nil)
        #expect(changed.redirects?.follows == false)

        // The initializer with arguments keeps each of them.
        let given = RequestOptions(
            handlesCookies: true, cachePolicy: .reloadIgnoringCacheData, cacheLifetime: .seconds(60),
            credential: Credential(user: "u", password: "p"), retryPolicy: RetryPolicy(maximumAttempts: 3),
            requestTimeout: .seconds(2), resourceTimeout: .seconds(3), redirects: .follow(maximum: 4),
            unixSocketPath: "/run/s", priority: .low, waitsForConnectivity: false)
        #expect(given.handlesCookies == true)
        #expect(given.cachePolicy == .reloadIgnoringCacheData)
        #expect(given.cacheLifetime == .seconds(60))
        #expect(given.credential?.user == "u")
        #expect(given.retryPolicy?.maximumAttempts == 3)
        #expect(given.requestTimeout == .seconds(2))
        #expect(given.resourceTimeout == .seconds(3))
        #expect(given.redirects?.maximum == 4)
        #expect(given.unixSocketPath == "/run/s")
        #expect(given.priority == .low)
        #expect(given.waitsForConnectivity == false)
    }

    @Test func aCopyOfTransferMetricsChangesAlone() {
        var original = TransferMetrics()
        original.httpVersion = "1.1"
        original.bytesReceived = 500
        var copy = original
        #expect(copy == original)
        #expect(copy.hashValue == original.hashValue)
        copy.bytesReceived = 900
        copy.remoteIP = "127.0.0.1"
        copy.remotePort = 8080
        #expect(original.bytesReceived == 500)
        #expect(original.remoteIP == "")
        #expect(copy.remoteAddress == "127.0.0.1:8080")
        #expect(copy != original)

        // Changing the empty metrics of one value leaves every other `TransferMetrics()` empty.
        #expect(TransferMetrics().bytesReceived == 0)
        #expect(TransferMetrics().httpVersion == "")
        #expect(TransferMetrics() == TransferMetrics())
    }

    @Test func transactionsSurviveCopies() {
        let url = URL(string: "https://example.com/a")!
        var first = TransactionMetrics(request: HTTPRequest(url: url), response: HTTPResponse(status: .found))
        first.duration = .milliseconds(10)
        var last = TransactionMetrics(request: HTTPRequest(url: url), response: HTTPResponse(status: .ok))
        last.duration = .milliseconds(30)
        last.bytesReceived = 42
        let metrics = TransferMetrics(transactions: [first, last], redirectCount: 1)
        var copy = metrics
        copy.transactions = [last]
        #expect(metrics.transactions.count == 2)
        #expect(metrics.totalDuration == .milliseconds(40))
        #expect(metrics.bytesReceived == 42)
        #expect(metrics.redirectCount == 1)
        #expect(copy.transactions.count == 1)
        #expect(copy.totalDuration == .milliseconds(40))
    }
}

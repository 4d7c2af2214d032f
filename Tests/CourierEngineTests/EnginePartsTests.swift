import Foundation
import Testing

@testable import CourierEngine
@testable import CourierTransport

/// The engine's parts on their own, without libcurl transfers or servers: where a session's
/// engines place requests and how they divide its limits, the admission queue, the throttle
/// schedule, the parsed-URL cache, the address overrides' lines. What the engine does with a
/// server is tested end to end in CourierTests (`EngineGroupTests` and the rest).
@Suite struct EnginePartsTests {
    // MARK: Placement

    @Test(arguments: [(6, 2, [3, 3]), (6, 4, [2, 2, 1, 1]), (2, 4, [1, 1, 1, 1]), (0, 3, [0, 0, 0])])
    func aLimitIsDividedAmongTheEngines(limit: Int, engines: Int, shares: [Int]) {
        #expect(EnginePlacement.shares(of: limit, engineCount: engines) == shares)
    }

    @Test func aSessionNeverHasMoreEnginesThanItsTotalConnectionLimit() {
        #expect(EnginePlacement.engineCount(requested: 8, maximumConnections: 3) == 3)
        #expect(EnginePlacement.engineCount(requested: 8, maximumConnections: 0) == 8)
        #expect(EnginePlacement.engineCount(requested: 0, maximumConnections: 0) == 1)
    }

    @Test func anOriginKeepsItsHomeEngineWhileLoadsTie() {
        let placement = EnginePlacement(engineCount: 4, maximumConnectionsPerHost: 6)
        let origin = EnginePlacement.origin(of: "https://api.example.com:8443/v1/users?page=2")
        #expect(String(Substring(origin)) == "https://api.example.com:8443")
        let home = placement.engine(for: origin) { _ in 0 }
        for _ in 0..<10 { #expect(placement.engine(for: origin) { _ in 0 } == home) }
        // A busy home spills to the least loaded engine.
        let spilled = placement.engine(for: origin) { $0 == home ? 5 : ($0 == (home + 2) % 4 ? 1 : 3) }
        #expect(spilled == (home + 2) % 4)
        // Origins spread their homes over the engines.
        let homes = Set(
            (0..<64).map { index in
                placement.engine(for: EnginePlacement.origin(of: "https://host\(index).example.com/")) { _ in 0 }
            })
        #expect(homes == [0, 1, 2, 3])
    }

    @Test func anOriginStaysInAWindowAsWideAsItsConnectionLimit() {
        // Four engines, two connections per host: each origin may use two engines, each
        // holding one connection to it.
        let placement = EnginePlacement(engineCount: 4, maximumConnectionsPerHost: 2)
        #expect(placement.originWidth == 2)
        for index in 0..<32 {
            let origin = EnginePlacement.origin(of: "http://host\(index).test/")
            let home = placement.engine(for: origin) { _ in 0 }
            // However the others are loaded, the choice is home or the next.
            for busy in 0..<4 {
                let chosen = placement.engine(for: origin) { $0 == busy ? 0 : 10 }
                #expect(chosen == home || chosen == (home + 1) % 4)
            }
        }
    }

    // MARK: The engine's parts

    @Test func theAdmissionQueueLetsTheLimitRunAndTheRestWaitInOrder() {
        final class Item: Sendable {
            let name: String
            init(_ name: String) { self.name = name }
        }
        let queue = AdmissionQueue<Item>(limit: 2)
        let (a, b, c, d) = (Item("a"), Item("b"), Item("c"), Item("d"))
        #expect(queue.admit(a) && queue.admit(b))
        #expect(!queue.admit(c) && !queue.admit(d))
        #expect(queue.counts == (2, 2))
        #expect(queue.release() === c)  // a's place goes to c
        #expect(queue.release() === d)
        #expect(queue.release() == nil)  // nothing waits: a place is freed
        #expect(queue.counts == (1, 0))
        #expect(queue.admit(a))
        #expect(!queue.admit(b))
        #expect(queue.drain().map(\.name) == ["b"])
        #expect(queue.counts.waiting == 0)
    }

    @Test func theThrottleScheduleReleasesWhatIsDue() {
        final class Item {}
        var schedule = ThrottleSchedule<Item>()
        let (first, second, third) = (Item(), Item(), Item())
        schedule.wake(first, at: 300)
        schedule.wake(second, at: 100)
        schedule.wake(third, at: 200)
        #expect(schedule.earliestDeadline == 100)
        #expect(schedule.takeDue(now: 50).isEmpty)
        let due = schedule.takeDue(now: 250)
        #expect(due.count == 2 && due[0] === second && due[1] === third)
        schedule.remove(first)
        #expect(schedule.isEmpty && schedule.earliestDeadline == nil)
    }

    @Test func theParsedURLCacheParsesEachURLOnce() throws {
        var cache = ParsedURLCache(capacity: 2)
        let first = cache.parsed("https://a.test/x")
        let a = try #require(first)
        #expect(cache.parsed("https://a.test/x") === a)
        let second = cache.parsed("https://b.test/y")
        let b = try #require(second)
        #expect(cache.parsed("https://a.test/x") === a)
        #expect(cache.parsed("https://b.test/y") === b)
        _ = cache.parsed("https://c.test/z")  // over capacity: emptied, then c
        #expect(cache.count == 1)
        let bad = cache.parsed("http://[bad")
        #expect(bad == nil)
    }

    @Test func addressOverridesBecomeLibcurlsLinesWithTheHostNormalized() {
        let resolve = AddressOverride.resolve("Bücher.Test.", port: 443, to: "::1")
        let connect = AddressOverride.connect("API.test", port: 80, to: "10.0.0.1", port: 8080)
        #expect(AddressOverrideLists.resolveLine(resolve) == "xn--bcher-kva.test:443:[::1]")
        #expect(AddressOverrideLists.connectLine(connect) == "api.test:80:10.0.0.1:8080")
        #expect(AddressOverrideLists.resolveLine(connect) == nil)
    }

    // MARK: Shared CA stores

    /// Which trust gets a store parsed once for the session, and which stays libcurl's to
    /// build for each connection. The store's effect on connections is tested against a TLS
    /// server (`TLSTests.aSessionReadsItsCAFileOnce`).
    @Test(.enabled(if: CAStores.isAvailable, "libcurl does TLS with OpenSSL"))
    func aTrustConfigurationGetsOneStoreWhereOpenSSLDoesTLS() throws {
        let stores = CAStores()
        defer { stores.release() }
        let options = TransferOptions()
        // The system's trust alone: its bundle, once.
        let system = try #require(stores.store(for: TLSPolicy(), options: options))
        #expect(stores.store(for: TLSPolicy(), options: options)?.name == system.name)
        // A file instead of the system's: another store.
        let bundle = FileManager.default.temporaryDirectory.appendingPathComponent("stores-\(UUID().uuidString).pem")
        try Data(contentsOf: URL(fileURLWithPath: try #require(CurlRuntime.systemCABundle))).write(to: bundle)
        defer { try? FileManager.default.removeItem(at: bundle) }
        var instead = TLSPolicy()
        instead.caFile = bundle.path
        instead.trustsSystemCAs = false
        let other = try #require(stores.store(for: instead, options: options))
        #expect(other.name != system.name)
        // A file that cannot be read: libcurl's to report.
        var missing = instead
        missing.caFile = bundle.path + ".missing"
        #expect(stores.store(for: missing, options: options) == nil)
        // An evaluator checks against the same store (its check installs it).
        var evaluated = TLSPolicy()
        evaluated.evaluator = ServerTrustEvaluator { _ in true }
        #expect(stores.store(for: evaluated, options: options)?.name == system.name)
        // No verification, nothing trusted: libcurl's stores.
        var unverified = TLSPolicy()
        unverified.verifies = false
        var nothing = TLSPolicy()
        nothing.trustsSystemCAs = false
        for policy in [unverified, nothing] {
            #expect(stores.store(for: policy, options: options) == nil)
        }
        // Through an HTTPS proxy (libcurl 8 would hand the proxy's handshake the same store).
        var proxied = TransferOptions()
        proxied.proxy = "https://proxy.test:3128"
        #expect(stores.store(for: TLSPolicy(), options: proxied) == nil)
        proxied.proxy = "http://proxy.test:3128"
        #expect(stores.store(for: TLSPolicy(), options: proxied)?.name == system.name)
    }
}

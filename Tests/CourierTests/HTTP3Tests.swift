import Foundation
import Testing

@testable import Courier
@_spi(CourierInternals) @testable import CourierCore
@testable import CourierEngine
@testable import CourierStorage
@testable import CourierTransport

/// HTTP/3 against hypercorn on loopback (`Tests/Support/serve_h3.py`: QUIC and TLS on one port
/// number). What works over HTTP/2 is checked over HTTP/3 too. The tests that need HTTP/3 run
/// only with a libcurl that has it (`scripts/libcurl-matrix` builds one and runs this suite
/// with it loaded); with the system's (Debian's has no HTTP/3) they are skipped, and the tests
/// of what a libcurl without HTTP/3 does run instead.
@Suite struct HTTP3Tests {
    static let hasHTTP3 = CourierInfo.supportsHTTP3
    static let noHTTP3: Comment =
        "the loaded libcurl has no HTTP/3: `scripts/libcurl-matrix --swap --versions 8.21.0-http3 --filter HTTP3Tests` runs this"

    /// An ephemeral manager on the HTTP/3 server, trusting its certificate.
    static func manager(
        _ server: HTTP3Server, version: HTTPVersionPreference = .http3,
        _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.httpVersion = version
        configuration.tls.certificateAuthorityFile = server.certificate
        configure(&configuration)
        let api = HTTPSessionManager(baseURL: server.url, configuration: configuration)
        api.requestSerializer = JSONRequestSerializer()
        return api
    }

    // MARK: - Without HTTP/3

    @Test(.enabled(if: !hasHTTP3, "the loaded libcurl has HTTP/3"))
    func http3OnlyFailsBeforeSendingWithALibcurlWithoutIt() async throws {
        let server = try await TestServers.http3()
        let error = await capturedError { _ = try await Self.manager(server).GET("get") }
        guard case .unsupportedFeature(let context) = error as? CourierError else {
            Issue.record("expected unsupportedFeature, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("HTTP/3"))
        #expect(context.message.contains(CourierInfo.libcurlVersion))
        #expect(context.response == nil)
    }

    @Test(.enabled(if: !hasHTTP3, "the loaded libcurl has HTTP/3"))
    func theFallbackChoicesSpeakHTTP2WithALibcurlWithoutHTTP3() async throws {
        let server = try await TestServers.http3()
        for version in [HTTPVersionPreference.http3WithFallback, .http3WhenAdvertised] {
            let response = try await Self.manager(server, version: version)
                .request(.get, "get", serializer: JSONResponseSerializer())
            #expect(response.metrics.httpVersion == "2", "\(version)")
            #expect(response.value["http_version"] == "2")
        }
    }

    @Test(.enabled(if: !hasHTTP3, "the loaded libcurl has HTTP/3"))
    func theCommandLineSaysWhyHTTP3IsNotThere() async throws {
        let server = try await TestServers.http3()
        let run = try await CLITests.courier([
            "--http3-only", "--cacert", server.certificate.path,
            server.url.appendingPathComponent("get").absoluteString,
        ])
        #expect(run.status != 0)
        #expect(run.stderr.contains("HTTP/3"), "\(run.stderr)")
    }

    @Test func theVersionNamesTheLoadedLibcurlsFeatures() async throws {
        #expect(CourierInfo.libcurlFeatures.contains("HTTP3") == Self.hasHTTP3)
        #expect(CourierInfo.libcurlFeatures.contains("SSL"))
        #expect(CourierInfo.libcurlDescription.hasPrefix("libcurl/\(CourierInfo.libcurlVersion)"))
        let version = try await CLITests.courier(["--version"])
        #expect(version.stdout.contains(CourierInfo.libcurlDescription))
        #expect(version.stdout.contains("HTTP3") == Self.hasHTTP3)
    }

    // MARK: - Alt-Svc, with or without HTTP/3

    @Test func aSessionWithStorageRemembersWhatAnOriginAdvertised() async throws {
        let server = try await TestServers.http3()
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("courier-altsvc-\(UUID())")
        defer { try? FileManager.default.removeItem(at: storage) }
        var configuration = HTTPSessionConfiguration.default
        configuration.storageDirectory = storage
        configuration.cacheCapacity = 0
        configuration.httpVersion = .http3WhenAdvertised
        configuration.tls.certificateAuthorityFile = server.certificate
        let api = HTTPSessionManager(baseURL: server.url, configuration: configuration)
        let response = try await api.request(.get, "get", serializer: JSONResponseSerializer())
        #expect(response.response.headerFields[HTTPField.Name("alt-svc")!]?.contains("h3=") == true)
        let saved = try JSONSerialization.jsonObject(
            with: Data(contentsOf: storage.appendingPathComponent("alt-svc.json")))
        let origins = try #require(saved as? [String: Any])
        #expect(Array(origins.keys) == ["localhost:\(server.port)"])

        // Another session on the same storage knows it at once.
        let store = AltServiceStore(file: storage.appendingPathComponent("alt-svc.json"))
        #expect(store.prefersHTTP3("localhost:\(server.port)"))
        #expect(!store.prefersHTTP3("localhost:\(server.port + 1)"))
    }

    @Test func altSvcIsReadAsRFC7838Says() {
        typealias Store = AltServiceStore
        #expect(Store.sameAuthorityHTTP3(#"h3=":443"; ma=3600"#, port: "443") == .some(maxAge: 3600))
        #expect(Store.sameAuthorityHTTP3(#"h3=":443""#, port: "443") == .some(maxAge: 86_400))
        #expect(Store.sameAuthorityHTTP3(#"h2=":443", h3-29=":443", h3=":8443""#, port: "443") == .none)
        #expect(Store.sameAuthorityHTTP3(#"h3="other.example:443""#, port: "443") == .none)
        #expect(Store.sameAuthorityHTTP3(#"h3=":443";ma=0"#, port: "443") == .none)
        #expect(Store.sameAuthorityHTTP3("clear", port: "443") == .clear)
        #expect(
            Store.sameAuthorityHTTP3(#"h3=":443"; ma="60"; persist=1, h3=":443"; ma=120"#, port: "443")
                == .some(maxAge: 120))
        #expect(Store.sameAuthorityHTTP3(#"h3=":443;ma=1""#, port: "443") == .none)
        #expect(Store.origin(authority: "Example.COM") == "example.com:443")
        #expect(Store.origin(authority: "example.com:8443") == "example.com:8443")
        #expect(Store.origin(authority: "[::1]:8443") == "[::1]:8443")
        #expect(Store.origin(authority: "example.com:x") == nil)

        let store = AltServiceStore(file: nil)
        store.record(#"h3=":443""#, origin: "example.com:443")
        #expect(store.prefersHTTP3("example.com:443"))
        store.noteFallback("example.com:443")
        #expect(!store.prefersHTTP3("example.com:443"))
        store.record("clear", origin: "example.com:443")
        #expect(!store.prefersHTTP3("example.com:443"))
    }

    // MARK: - Over HTTP/3

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func everyVerbAndJSONGoOverHTTP3() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server)
        for method in [HTTPRequest.Method.get, .delete] {
            let response = try await api.request(
                method, "anything/\(method.rawValue)", serializer: JSONResponseSerializer())
            #expect(response.value["method"] == .string(method.rawValue))
            #expect(response.value["http_version"] == "3")
            #expect(response.metrics.httpVersion == "3")
        }
        for method in [HTTPRequest.Method.post, .put, .patch] {
            let response = try await api.request(
                method, "anything", parameters: ["name": "Ada", "n": 3], serializer: JSONResponseSerializer())
            #expect(response.value["method"] == .string(method.rawValue))
            #expect(response.value["json"] == ["name": "Ada", "n": 3])
            #expect(response.value["http_version"] == "3")
        }
        let head = try await api.request(.head, "get", serializer: DataResponseSerializer())
        #expect(head.response.status == .ok)
        #expect(head.metrics.httpVersion == "3")
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func metricsReportHTTP3AndTheQUICHandshake() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server)
        let first = try await api.request(.get, "get", serializer: DataResponseSerializer())
        #expect(first.metrics.httpVersion == "3")
        #expect(!first.metrics.reusedConnection)
        // The QUIC handshake (TLS 1.3 inside it) is the "TLS handshake" of the connection.
        #expect(first.metrics.tlsHandshake > .zero)
        #expect(first.metrics.tlsHandshake >= first.metrics.connect)
        #expect(first.metrics.remotePort == server.port)
        let second = try await api.request(.get, "get", serializer: DataResponseSerializer())
        #expect(second.metrics.reusedConnection)
        #expect(second.metrics.transactions.last?.httpVersion == "3")
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func manyRequestsShareOneQUICConnection() async throws {
        let server = try await TestServers.http3()
        // One engine: each engine of a session keeps a connection of its own to an origin.
        let api = Self.manager(server) { $0.engineCount = 1 }
        _ = try await api.GET("get")  // the connection, before the crowd
        let replies = try await withThrowingTaskGroup(of: JSON.self) { group in
            for index in 0..<100 {
                group.addTask { try await api.GET("anything/\(index)") }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(replies.count == 100)
        #expect(replies.allSatisfy { $0["http_version"] == "3" })
        let clients = Set(replies.compactMap { $0["client"].stringValue })
        #expect(clients.count == 1, "\(clients.count) QUIC connections")
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func requestsOneAfterAnotherKeepTheirQUICConnection() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server) { $0.engineCount = 1 }
        var clients: Set<String> = []
        for index in 0..<30 {
            let reply = try await api.GET("anything/\(index)")
            #expect(reply["http_version"] == "3")
            if let client = reply["client"].stringValue { clients.insert(client) }
            // An idle moment, in which the server may send on the connection.
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(clients.count == 1, "\(clients.count) QUIC connections for 30 requests one after another")
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func aByteStreamPausesForASlowConsumerOverHTTP3() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server)
        let total = 64 << 20
        var iterator = api.bytes(.get, "bytes/\(total)").makeAsyncIterator()
        var received = 0
        while received < 4 << 20, let chunk = try await iterator.next() {
            received += chunk.count
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(300))
        // The stream holds no more than its capacity (and one delivery) while the reader sleeps.
        #expect(iterator.storage.sink.largestBuffered <= StreamSink.capacity + (256 << 10))
        let (offset, matches) = try await readPatternToEnd(&iterator, from: received)
        #expect(offset == total)
        #expect(matches)
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func uploadsFromDataFilesAndStreamsArriveWhole() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server)
        let payload = faultBytes(6 << 20)
        let digest = SHA256.hex(payload)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("courier-h3-upload-\(UUID())")
        try payload.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let chunks = stride(from: 0, to: payload.count, by: 100_000).map {
            payload[$0..<min($0 + 100_000, payload.count)]
        }
        for body in [UploadBody.data(payload), .file(file), .stream(Array(chunks).async)] {
            let reply = try await api.uploadTask(.post, "upload", body: body).value
            #expect(reply["length"] == .int(payload.count))
            #expect(reply["sha256"] == .string(digest))
        }
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func aDownloadResumesOverHTTP3() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-h3-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("file.bin")
        let total = 4_000_000
        let download = api.downloadTask("file/\(total)", to: destination)
        // 40 s for the whole file: still running when cancelled, even when the whole suite
        // runs at once and this task waits tens of seconds for a thread.
        download.setMaximumBytesPerSecond(100_000)
        for await progress in download.downloadProgress where progress.completedBytes > 200_000 { break }
        let resumeData = try #require(await download.cancel(producingResumeData: true))
        await #expect(throws: CancellationError.self) { _ = try await download.value }
        #expect(resumeData.bytesWritten > 0 && resumeData.bytesWritten < Int64(total))
        let resumed = try await api.downloadTask(resumingFrom: resumeData, to: destination).response
        #expect(resumed.status == .partialContent)
        #expect(try Data(contentsOf: destination) == faultBytes(total))
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func cookiesAndTheCacheWorkOverHTTP3() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server) { $0.cacheCapacity = 1 << 20 }
        _ = try await api.GET("cookies/set", parameters: ["flavour": "oat"])
        let cookies = try await api.GET("cookies")
        #expect(cookies["cookies"]["flavour"] == "oat")

        let name = "h3-\(UUID())"
        let first = try await api.request(.get, "cache/\(name)", serializer: JSONResponseSerializer())
        let second = try await api.request(.get, "cache/\(name)", serializer: JSONResponseSerializer())
        #expect(first.value["served"] == 1)
        #expect(second.value["served"] == 1)
        #expect(second.source == .cache)
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func publicKeyPinsHoldOverHTTP3() async throws {
        let server = try await TestServers.http3()
        let pinned = Self.manager(server) { $0.tls.pinnedPublicKeys["localhost"] = [server.pin] }
        #expect(try await pinned.GET("get")["http_version"] == "3")
        let wrong = Self.manager(server) {
            $0.tls.pinnedPublicKeys["localhost"] = ["sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
        }
        let error = await capturedError { _ = try await wrong.GET("get") }
        #expect(isCourierError(error) { if case .tls = $0 { true } else { false } }, "\(String(describing: error))")
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func cancellingAnHTTP3RequestEndsItAndLeavesTheSessionUsable() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server)
        _ = try await api.GET("get")
        let slow = Task {
            try await api.request(
                .get, "drip", parameters: ["bytes": 10, "chunks": 10, "delay_ms": 1000],
                serializer: DataResponseSerializer())
        }
        try await Task.sleep(for: .milliseconds(300))
        slow.cancel()
        await #expect(throws: CancellationError.self) { _ = try await slow.value }
        let after = try await api.request(.get, "get", serializer: JSONResponseSerializer())
        #expect(after.value["http_version"] == "3")
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func http3OnlyRefusesAnHTTPURLBeforeSending() async throws {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.httpVersion = .http3
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: configuration)
        let error = await capturedError { _ = try await api.GET("status/200") }
        guard case .unsupportedFeature(let context) = error as? CourierError else {
            Issue.record("expected unsupportedFeature, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("https"))
    }

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func aRequestCanAskForHTTP3OnASessionThatDoesNot() async throws {
        let server = try await TestServers.http3()
        let api = Self.manager(server, version: .http2OverTLS)
        #expect(try await api.GET("get")["http_version"] == "2")
        let options = { () -> RequestOptions in
            var options = RequestOptions()
            options.httpVersion = .http3
            return options
        }()
        #expect(try await api.GET("get", options: options)["http_version"] == "3")
    }

    // MARK: - Falling back

    /// The tests that make the shared nginx's UDP port silent, one at a time.
    @Suite(.serialized) struct FallingBack {

        /// A small file in nginx's root, for these tests.
        static func fixture(_ nginx: NginxServer) throws -> String {
            let name = "h3-fallback.txt"
            try Data("fallback\n".utf8).write(to: nginx.root.appendingPathComponent(name))
            return name
        }

        @Test(.enabled(if: HTTP3Tests.hasHTTP3, HTTP3Tests.noHTTP3))
        func withFallbackATCPOnlyServerIsReachedWhenUDPIsSilent() async throws {
            let nginx = try await TestServers.nginx()
            let port = try #require(nginx.https.port)
            let silence = try UDPSilence(port: port)
            defer { silence.close() }
            var configuration = HTTPSessionConfiguration.ephemeral
            configuration.httpVersion = .http3WithFallback
            configuration.tls.certificateAuthorityFile = nginx.certificate
            let api = HTTPSessionManager(baseURL: nginx.https, configuration: configuration)
            let response = try await api.request(.get, Self.fixture(nginx), serializer: DataResponseSerializer())
            #expect(response.metrics.httpVersion == "2")
            #expect(silence.datagramsReceived() > 0, "no QUIC attempt was made")

            // HTTP/3 only to the same server fails, and does not hang.
            var only = RequestOptions()
            only.httpVersion = .http3
            only.resourceTimeout = .seconds(20)
            let error = await capturedError {
                _ = try await HTTPSessionManager(baseURL: nginx.https, configuration: configuration)
                    .GET(Self.fixture(nginx), options: only, serializer: DataResponseSerializer())
            }
            #expect(error is CourierError)
        }

        @Test(.enabled(if: HTTP3Tests.hasHTTP3, HTTP3Tests.noHTTP3))
        func whenAdvertisedANewConnectionGoesOverHTTP3() async throws {
            let server = try await TestServers.http3()
            let api = HTTP3Tests.manager(server, version: .http3WhenAdvertised) {
                $0.connectionIdleTimeout = .seconds(1)
            }
            let first = try await api.request(.get, "get", serializer: JSONResponseSerializer())
            #expect(first.metrics.httpVersion == "2")
            // The open HTTP/2 connection is too old to reuse after a second: the next is new.
            try await Task.sleep(for: .milliseconds(2100))
            let second = try await api.request(.get, "get", serializer: JSONResponseSerializer())
            #expect(second.metrics.httpVersion == "3")
            #expect(second.value["http_version"] == "3")
        }

        @Test(.enabled(if: HTTP3Tests.hasHTTP3, HTTP3Tests.noHTTP3))
        func anOriginWhoseQUICFellBackIsLeftAloneForAWhile() async throws {
            let nginx = try await TestServers.nginx()
            let port = try #require(nginx.https.port)
            let silence = try UDPSilence(port: port)
            defer { silence.close() }
            let storage = FileManager.default.temporaryDirectory.appendingPathComponent("courier-altsvc-\(UUID())")
            defer { try? FileManager.default.removeItem(at: storage) }
            // What an earlier session learned: nginx's origin advertised h3 (its UDP is silent).
            let seed = AltServiceStore(file: storage.appendingPathComponent("alt-svc.json"))
            seed.record(#"h3=":\#(port)""#, origin: "localhost:\(port)")
            var configuration = HTTPSessionConfiguration.default
            configuration.storageDirectory = storage
            configuration.cacheCapacity = 0
            configuration.httpVersion = .http3WhenAdvertised
            configuration.connectionIdleTimeout = .seconds(1)
            configuration.tls.certificateAuthorityFile = nginx.certificate
            let api = HTTPSessionManager(baseURL: nginx.https, configuration: configuration)
            let first = try await api.request(.get, Self.fixture(nginx), serializer: DataResponseSerializer())
            #expect(first.metrics.httpVersion == "2")
            #expect(silence.datagramsReceived() > 0, "the advertised origin got no QUIC attempt")
            try await Task.sleep(for: .milliseconds(2100))
            let second = try await api.request(.get, Self.fixture(nginx), serializer: DataResponseSerializer())
            #expect(second.metrics.httpVersion == "2")
            #expect(!second.metrics.reusedConnection)
            #expect(silence.datagramsReceived() == 0, "QUIC was tried again at once")
        }

    }

    // MARK: - The command line

    @Test(.enabled(if: hasHTTP3, Self.noHTTP3))
    func theCommandLineSpeaksHTTP3() async throws {
        let server = try await TestServers.http3()
        let run = try await CLITests.courier([
            "--http3-only", "--cacert", server.certificate.path, "-p", "hb",
            server.url.appendingPathComponent("get").absoluteString,
        ])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("HTTP/3 200"), "\(run.stdout.prefix(200))")
    }
}

/// A UDP socket bound to a loopback port that reads and drops whatever arrives: QUIC to that
/// port meets silence, as behind a firewall that drops UDP.
final class UDPSilence: @unchecked Sendable {
    private let socket: Int32

    init(port: Int) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard socket >= 0 else { throw TestServerError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            Glibc.close(socket)
            throw TestServerError("bind UDP 127.0.0.1:\(port): errno \(errno)")
        }
    }

    /// The datagrams that arrived since the last call (read without waiting).
    func datagramsReceived() -> Int {
        var count = 0
        var buffer = [UInt8](repeating: 0, count: 2048)
        while recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT)) >= 0 { count += 1 }
        return count
    }

    func close() { Glibc.close(socket) }
}

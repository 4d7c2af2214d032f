import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// Every per-request option on every kind of task that takes it, against the fault server
/// and httpbin.
@Suite struct RequestOptionsTests {
    /// The kinds of task, each run the way a user writes it.
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case request, dataTask, verb, download, upload, bytes, stream

        var testDescription: String { rawValue }

        /// Runs a request of this kind to `path` with `options`; the status and body of the
        /// answer, whether it succeeded or failed.
        func run(_ api: HTTPSessionManager, _ path: String, options: RequestOptions) async -> Outcome {
            let serializer = DataResponseSerializer(acceptableStatusCodes: 200..<300)
            do {
                switch self {
                case .request:
                    let response = try await api.request(.get, path, options: options, serializer: serializer)
                    return Outcome(status: response.response.status.code, body: response.value)
                case .dataTask:
                    let response = try await api.dataTask(.get, path, options: options, serializer: serializer).response
                    return Outcome(status: response.response.status.code, body: response.value)
                case .verb:
                    return Outcome(status: 200, body: try await api.GET(path, options: options, serializer: serializer))
                case .download:
                    let directory = try DownloadTests.temporaryDirectory()
                    let file = directory.appendingPathComponent("body")
                    let url = try await api.downloadTask(path, requestOptions: options, to: file).value
                    return Outcome(status: 200, body: try Data(contentsOf: url))
                case .upload:
                    let response = try await api.uploadTask(
                        .put, path, body: .data(Data("sent".utf8)), options: options, serializer: serializer
                    ).response
                    return Outcome(status: response.response.status.code, body: response.value)
                case .bytes:
                    var body = Data()
                    for try await chunk in api.bytes(.get, path, options: options) { body.append(contentsOf: chunk) }
                    return Outcome(status: 200, body: body)
                case .stream:
                    let (head, stream) = try await api.stream(.get, path, options: options)
                    var body = Data()
                    for try await chunk in stream { body.append(contentsOf: chunk) }
                    return Outcome(status: head.status.code, body: body)
                }
            } catch {
                let courierError = error as? CourierError
                return Outcome(
                    status: courierError?.response?.status.code, body: courierError?.body ?? Data(), error: courierError
                )
            }
        }
    }

    struct Outcome {
        var status: Int?
        var body: Data
        var error: CourierError?

        var json: JSON { (try? JSON(parsing: body)) ?? .null }
        var errorKind: String? { error?.kind }
    }

    static func name(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8))" }

    @Test(arguments: Kind.allCases)
    func requestTimeout(_ kind: Kind) async throws {
        let api = try await faultManager()
        let outcome = await kind.run(api, "silent", options: RequestOptions(requestTimeout: .seconds(1)))
        #expect(outcome.errorKind == "timedOut")
    }

    @Test(arguments: Kind.allCases)
    func resourceTimeout(_ kind: Kind) async throws {
        let api = try await faultManager()
        // Bytes keep coming (the request timeout never fires), but the whole takes 5 s.
        let outcome = await kind.run(
            api, "drip?n=50&delay=100", options: RequestOptions(resourceTimeout: .milliseconds(500)))
        #expect(outcome.errorKind == "timedOut")
    }

    @Test(arguments: Kind.allCases)
    func redirectsNotFollowed(_ kind: Kind) async throws {
        let api = try await faultManager()
        let outcome = await kind.run(api, "redirect?to=/echo", options: RequestOptions(redirects: .doNotFollow))
        #expect(outcome.status == 302)
        #expect(outcome.errorKind == "unacceptableStatusCode")
        let followed = await kind.run(api, "redirect?to=/echo", options: RequestOptions(redirects: .follow))
        #expect(followed.json["path"] == "/echo")
    }

    @Test(arguments: Kind.allCases)
    func redirectLimit(_ kind: Kind) async throws {
        let api = try await faultManager()
        let outcome = await kind.run(api, "redirect-loop", options: RequestOptions(redirects: .follow(maximum: 2)))
        #expect(outcome.errorKind == "tooManyRedirects")
        #expect(outcome.error?.context.message.contains("2 redirects") == true)
    }

    @Test(arguments: Kind.allCases)
    func redirectHandlerChangesOrStopsAHop(_ kind: Kind) async throws {
        let api = try await faultManager()
        let changed = RedirectBehavior.follow { hop in
            var next = hop.proposed
            next.path = "/echo?hop=\(hop.count)&from=\(hop.response.status.code)"
            next.headerFields[HTTPField.Name("X-Redirected")!] = "yes"
            return next
        }
        let outcome = await kind.run(api, "redirect?to=/status/500", options: RequestOptions(redirects: changed))
        #expect(outcome.json["query"] == "hop=0&from=302")
        #expect(outcome.json["headers"]["X-Redirected"] == "yes")

        let stopped = await kind.run(
            api, "redirect?to=/echo", options: RequestOptions(redirects: .follow(handler: { _ in nil })))
        #expect(stopped.status == 302)
    }

    @Test(arguments: Kind.allCases)
    func credential(_ kind: Kind) async throws {
        let api = try await faultManager()
        let path = "auth-required/\(Self.name("credential"))?user=ada&password=x"
        let outcome = await kind.run(
            api, path, options: RequestOptions(credential: Credential(user: "ada", password: "x")))
        #expect(outcome.json["authenticated"] == true, "\(String(describing: outcome.error))")
        let without = await kind.run(api, path, options: RequestOptions())
        #expect(without.status == 401)
    }

    @Test(arguments: Kind.allCases)
    func interceptors(_ kind: Kind) async throws {
        let api = try await faultManager()
        let tag = Interceptor(adapt: { request, context in
            var request = request
            request.headerFields[HTTPField.Name("X-Attempt")!] = "\(context.attempt)"
            return request
        })
        let outcome = await kind.run(api, "echo", options: RequestOptions(interceptors: [tag]))
        #expect(outcome.json["headers"]["X-Attempt"] == "1")
    }

    @Test(arguments: Kind.allCases)
    func retryPolicy(_ kind: Kind) async throws {
        let api = try await faultManager()
        let name = Self.name("retry-\(kind.rawValue)")
        let policy = RetryPolicy(initialDelay: .milliseconds(10), deadline: nil)  // no deadline: see RetryTests.manager
        let outcome = await kind.run(api, "flaky/\(name)?fail=1", options: RequestOptions(retryPolicy: policy))
        let requests = try await RetryTests.stats(name)["requests"]
        // (A byte stream is tried again too: the consumer had seen nothing of the 503.)
        #expect(outcome.json["attempt"] == 2)
        #expect(requests == 2)
    }

    @Test(arguments: Kind.allCases)
    func cookies(_ kind: Kind) async throws {
        let api = try await httpbinManager()
        _ = try await api.request(
            .get, "cookies/set", parameters: ["flavour": "oat"], serializer: DataResponseSerializer())
        let sent = await kind.run(api, "anything", options: RequestOptions())
        #expect(sent.json["headers"]["Cookie"] == "flavour=oat")
        let withheld = await kind.run(api, "anything", options: RequestOptions(handlesCookies: false))
        #expect(withheld.status == nil || withheld.status == 200)
        #expect(withheld.json["headers"]["Cookie"] == nil)
        #expect(withheld.json["method"] != nil)
    }

    /// The cache answers data requests only (request, data task, verb): downloads, uploads and
    /// byte streams always load.
    @Test(arguments: [Kind.request, .dataTask, .verb])
    func cachePolicyAndLifetime(_ kind: Kind) async throws {
        let api = try await httpbinManager { $0.cacheCapacity = 1 << 20 }
        let kept = RequestOptions(cacheLifetime: .seconds(60))
        let first = await kind.run(api, "uuid", options: kept)
        let second = await kind.run(api, "uuid", options: kept)
        #expect(first.json["uuid"] != nil)
        #expect(second.json["uuid"] == first.json["uuid"])
        let reloaded = await kind.run(api, "uuid", options: RequestOptions(cachePolicy: .reloadIgnoringCacheData))
        #expect(reloaded.json["uuid"] != nil)
        #expect(reloaded.json["uuid"] != first.json["uuid"])
    }

    @Test func aPOSTExportDownloadsToAFile() async throws {
        let api = try await faultManager()
        let directory = try DownloadTests.temporaryDirectory()
        let file = directory.appendingPathComponent("export.json")
        let url = try await api.downloadTask(.post, "echo", parameters: ["report": "q3", "rows": 12], to: file).value
        let echo = try JSON(parsing: Data(contentsOf: url))
        #expect(echo["method"] == "POST")
        #expect(echo["headers"]["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(echo["bodyLength"] == .int("report=q3&rows=12".utf8.count))

        // A body as is, with its type.
        let raw = directory.appendingPathComponent("export2.json")
        _ = try await api.downloadTask(
            .put, "echo", body: .data(Data("[1,2]".utf8), contentType: "application/json"), to: raw
        ).value
        let echoed = try JSON(parsing: Data(contentsOf: raw))
        #expect(echoed["method"] == "PUT")
        #expect(echoed["headers"]["Content-Type"] == "application/json")
        #expect(echoed["bodyLength"] == 5)
    }
}

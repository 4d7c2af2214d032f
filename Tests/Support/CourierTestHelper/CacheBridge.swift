// `CourierTestHelper cache-bridge STORAGE`: answers the HTTP cache test suite's `fetch()` calls
// (Conformance/run-cache-tests.mjs) with one manager on the `.default` configuration, storing in
// STORAGE. One JSON object per line on stdin (a request), one per line on stdout (its answer),
// matched by `id`; requests run concurrently, as the suite's runner sends them.
import Courier
import Foundation
import Synchronization

/// A `fetch()` call, as the harness sends it.
struct BridgedRequest: Decodable, Sendable {
    var id: Int
    var method: String
    var url: String
    var headers: [[String]]
    /// The body as text (the suite's bodies are short strings).
    var body: String?
    /// The Fetch API's cache mode (`default`, `no-store`, `reload`, `no-cache`, `force-cache`,
    /// `only-if-cached`).
    var cache: String?
    /// The Fetch API's redirect mode (`follow`, `manual`, `error`).
    var redirect: String?
}

/// What `fetch()` resolves (or rejects) with.
struct BridgedResponse: Encodable, Sendable {
    var id: Int
    var status: Int = 0
    var statusText = ""
    var headers: [[String]] = []
    /// The body, base64.
    var body = ""
    /// Set when the request failed: `fetch()` rejects with it.
    var error: String?
}

/// Writes whole lines to stdout, one writer at a time.
let bridgeOutput = Mutex(FileHandle.standardOutput)

func answer(_ response: BridgedResponse) {
    guard let data = try? JSONEncoder().encode(response) else { return }
    bridgeOutput.withLock { $0.write(data + Data("\n".utf8)) }
}

/// The lines of stdin, read on a thread of their own (a blocking read would hold one of the
/// few threads the concurrency pool has).
func standardInputLines() -> AsyncStream<String> {
    let (lines, continuation) = AsyncStream.makeStream(of: String.self)
    let reader = Thread {
        while let line = readLine() { continuation.yield(line) }
        continuation.finish()
    }
    reader.start()
    return lines
}

func runCacheBridge(storage: URL) async {
    var configuration = HTTPSessionConfiguration.default
    configuration.storageDirectory = storage
    let api = HTTPSessionManager(configuration: configuration)
    await withTaskGroup(of: Void.self) { group in
        for await line in standardInputLines() {
            guard let request = try? JSONDecoder().decode(BridgedRequest.self, from: Data(line.utf8)) else {
                FileHandle.standardError.write(Data("cache-bridge: cannot read \(line)\n".utf8))
                continue
            }
            group.addTask { answer(await send(request, through: api)) }
        }
    }
}

func send(_ request: BridgedRequest, through api: HTTPSessionManager) async -> BridgedResponse {
    var headers: [String: String] = [:]
    for pair in request.headers where pair.count == 2 {
        // Fetch combines repeated names into one value.
        if let known = headers.first(where: { $0.key.lowercased() == pair[0].lowercased() }) {
            headers[known.key] = known.value + ", " + pair[1]
        } else {
            headers[pair[0]] = pair[1]
        }
    }
    var options = RequestOptions()
    if request.redirect == "manual" || request.redirect == "error" { options.redirects = .doNotFollow }
    switch request.cache {
    case "no-store", "reload": options.cachePolicy = .reloadIgnoringCacheData
    case "force-cache": options.cachePolicy = .returnCacheDataElseLoad
    case "only-if-cached": options.cachePolicy = .returnCacheDataDontLoad
    case "no-cache":
        // As the Fetch standard's HTTP-network-or-cache fetch does for this mode.
        if !headers.keys.contains(where: { $0.lowercased() == "cache-control" }) {
            headers["Cache-Control"] = "max-age=0"
        }
    default: break
    }
    var answer = BridgedResponse(id: request.id)
    do {
        let serializer = DataResponseSerializer(acceptableStatusCodes: 100..<1000)
        let response =
            if let body = request.body {
                try await api.request(
                    .init(request.method) ?? .get, request.url, body: Data(body.utf8), headers: headers,
                    options: options, serializer: serializer)
            } else {
                try await api.request(
                    .init(request.method) ?? .get, request.url, headers: headers, options: options,
                    serializer: serializer)
            }
        answer.status = response.status.code
        answer.statusText = response.status.reasonPhrase
        answer.headers = response.response.headerFields.map { [$0.name.rawName, $0.value] }
        answer.body = response.data.base64EncodedString()
    } catch {
        answer.error = "\(error)"
    }
    return answer
}

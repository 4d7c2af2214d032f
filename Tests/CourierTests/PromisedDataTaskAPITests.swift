import Courier
import Foundation
import HTTPTypes
import Testing

// The data-task calls of the public API as first promised to users, copied as written. They
// must compile; `promisedExample` is also run against httpbin's `/anything` echo below.

struct User: Codable, Sendable {
    var id: Int
    var name: String
}

struct NewUser: Codable, Sendable {
    var name: String
}

// A shared API client, AFNetworking style: subclass the manager.
final class ExampleAPI: HTTPSessionManager {
    static let shared = ExampleAPI(baseURL: URL(string: "http://127.0.0.1:8080/v1/")!)
    var token: String?  // subclass state, actor-isolated

    override func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
        var request = request
        if let token { request.headerFields[.authorization] = "Bearer \(token)" }
        return request  // runs for every request of this manager
    }
    func user(_ id: Int) async throws -> User { try await GET("users/\(id)", as: User.self) }
}

/// The promised calls, verbatim but for the base URL, which points at httpbin's `/anything/v1/`.
func promisedExample(base: URL, userID: Int) async throws {
    let api = HTTPSessionManager(
        baseURL: base,
        configuration: .default)  // .default, .ephemeral, .background(identifier:)

    let json: JSON = try await api.GET("get", parameters: ["page": 2, "tags": ["a", "b"]])  // mixed literal
    let byID: JSON = try await api.GET("get", parameters: ["id": userID])  // values from variables
    let data: Data = try await api.GET("logo.png", serializer: DataResponseSerializer())
    try await api.DELETE("users/1")

    // Pluggable serializers, on the manager or per call.
    api.requestSerializer = JSONRequestSerializer()  // also: HTTPRequestSerializer (default:
    // query for GET/HEAD/DELETE, form body otherwise),
    // QueryRequestSerializer, FormRequestSerializer
    api.responseSerializer = JSONResponseSerializer(
        acceptableStatusCodes: 200..<300,
        removesKeysWithNullValues: true)

    // Tasks: the full response, progress as AsyncSequence, cancel, suspend/resume.
    let task = api.dataTask(.get, "bytes/1048576")
    for await progress in task.downloadProgress { print(progress.fractionCompleted) }
    let response: DataResponse<JSON> = try await task.response  // status, headerFields, data, value, metrics

    #expect(json["args"]["page"] == "2")
    #expect(json["args"]["tags[]"] == ["a", "b"])
    #expect(byID["args"]["id"] == .string(String(userID)))
    #expect(try JSON(parsing: data)["url"].stringValue?.hasSuffix("/anything/v1/logo.png") == true)
    #expect(response.status == .ok)
    #expect(response.value["url"].stringValue?.hasSuffix("/anything/v1/bytes/1048576") == true)
    #expect(response.metrics.totalDuration > .zero)
}

/// The POST with an `Encodable` body and a decoded reply, and the subclass's `user(_:)`, need
/// a server that speaks the example's API; they only have to compile.
func promisedExampleAgainstTheRealAPI(api: HTTPSessionManager) async throws {
    let user: User = try await api.POST("users", parameters: NewUser(name: "Ben"), as: User.self)
    let fetched = try await ExampleAPI.shared.user(user.id)
    _ = fetched
}

@Suite struct PromisedDataTaskAPITests {
    @Test func thePromisedExampleRunsAgainstHttpbin() async throws {
        let httpbin = try await TestServers.httpbin()
        try await promisedExample(base: httpbin.appendingPathComponent("anything/v1/"), userID: 42)
    }

    @Test func aSubclassAdaptsEveryRequestWithItsOwnState() async throws {
        let httpbin = try await TestServers.httpbin()
        let api = ExampleAPI(baseURL: httpbin.appendingPathComponent("anything/v1"))
        await MainActor.run {}  // any context may await the actor-isolated state
        await api.setToken("s3cret")
        let echo: JSON = try await api.GET("users/7")
        #expect(echo["headers"]["Authorization"] == "Bearer s3cret")
        #expect(echo["url"].stringValue?.hasSuffix("/anything/v1/users/7") == true)

        await api.setToken(nil)
        let anonymous: JSON = try await api.GET("users/7")
        #expect(anonymous["headers"]["Authorization"] == nil)
    }
}

extension ExampleAPI {
    func setToken(_ token: String?) { self.token = token }
}

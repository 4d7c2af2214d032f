import Courier
import Foundation
import HTTPTypes
import Testing

/// Every request serializer against httpbin's echo endpoints.
@Suite struct HttpbinSerializerTests {
    @Test func defaultSerializerPutsGETParametersInTheQuery() async throws {
        let api = try await httpbinManager()
        let echo: JSON = try await api.GET("get", parameters: ["page": 2, "tags": ["a", "b"], "q": "a b&c"])
        #expect(echo["args"] == ["page": "2", "tags[]": ["a", "b"], "q": "a b&c"])
        #expect(echo["url"].stringValue?.contains("q=a%20b%26c") == true)
    }

    @Test(arguments: [HTTPRequest.Method.post, .put, .patch])
    func defaultSerializerSendsAFormBodyForOtherMethods(method: HTTPRequest.Method) async throws {
        let api = try await httpbinManager()
        let path = method.rawValue.lowercased()
        let echo = try await api.request(
            method, path, parameters: ["name": "Zoë", "user": ["age": 40]], serializer: JSONResponseSerializer()
        ).value
        #expect(echo["form"] == ["name": "Zoë", "user[age]": "40"])
        #expect(echo["headers"]["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(echo["args"] == [:])
    }

    @Test func defaultSerializerPutsDELETEParametersInTheQuery() async throws {
        let api = try await httpbinManager()
        let echo: JSON = try await api.DELETE("delete", parameters: ["id": 7])
        #expect(echo["args"] == ["id": "7"])
        #expect(echo["data"] == "")
    }

    @Test func queryPathsKeepTheirOwnQuery() async throws {
        let api = try await httpbinManager()
        let echo: JSON = try await api.GET("get?fixed=1", parameters: ["added": 2])
        #expect(echo["args"] == ["fixed": "1", "added": "2"])
    }

    @Test func querySerializerUsesTheQueryForPOST() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = QueryRequestSerializer()
        let echo: JSON = try await api.POST("post", parameters: ["a": 1])
        #expect(echo["args"] == ["a": "1"])
        #expect(echo["form"] == [:])
    }

    @Test func formSerializerUsesABodyEvenForDELETE() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = FormRequestSerializer()
        let echo: JSON = try await api.DELETE("delete", parameters: ["a": 1])
        #expect(echo["form"] == ["a": "1"])
        #expect(echo["args"] == [:])
    }

    @Test func jsonSerializerSendsJSONBodies() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = JSONRequestSerializer()
        let parameters: JSON = ["name": "Zoë", "tags": ["a", 1, true, nil], "nested": ["x": 1.5]]
        let echo: JSON = try await api.POST("post", parameters: parameters)
        #expect(echo["json"] == parameters)
        #expect(echo["headers"]["Content-Type"] == "application/json")
        let put: JSON = try await api.PUT("put", parameters: parameters)
        #expect(put["json"] == parameters)
        let patch: JSON = try await api.PATCH("patch", parameters: parameters)
        #expect(patch["json"] == parameters)
    }

    @Test func jsonSerializerStillUsesTheQueryForGET() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = JSONRequestSerializer()
        let echo: JSON = try await api.GET("get", parameters: ["a": 1])
        #expect(echo["args"] == ["a": "1"])
    }

    @Test func encodableParametersAreEncodedLikeJSON() async throws {
        struct Filter: Encodable, Sendable {
            var page: Int
            var tags: [String]
            var owner: Owner
            struct Owner: Encodable, Sendable { var name: String }
        }
        let api = try await httpbinManager()
        let echo: JSON = try await api.GET(
            "get", parameters: Filter(page: 3, tags: ["x"], owner: .init(name: "Ann")))
        #expect(echo["args"] == ["page": "3", "tags[]": "x", "owner[name]": "Ann"])

        let userID = 42
        let byID: JSON = try await api.GET("get", parameters: ["id": userID])
        #expect(byID["args"]["id"] == "42")
    }

    @Test func anythingEchoesMethodsAndBodies() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = JSONRequestSerializer()
        for method: HTTPRequest.Method in [.get, .post, .put, .patch, .delete] {
            let echo = try await api.request(
                method, "anything/x", parameters: ["k": "v"], serializer: JSONResponseSerializer()
            ).value
            #expect(echo["method"].stringValue == method.rawValue)
            if method == .get || method == .delete {
                #expect(echo["args"] == ["k": "v"])
            } else {
                #expect(echo["json"] == ["k": "v"])
            }
        }
    }

    @Test func rawBodiesAreSentAsGiven() async throws {
        let api = try await httpbinManager()
        let body = Data((0..<1000).map { UInt8($0 % 256) })
        let echo = try await api.request(
            .post, "post", body: body, headers: ["Content-Type": "application/octet-stream"],
            serializer: JSONResponseSerializer()
        ).value
        let expected = "data:application/octet-stream;base64," + body.base64EncodedString()
        #expect(echo["data"].stringValue == expected)
    }

    @Test func defaultHeadersNameCourierAndALanguage() async throws {
        let api = try await httpbinManager()
        let echo: JSON = try await api.GET("headers")
        let agent = try #require(echo["headers"]["User-Agent"].stringValue)
        #expect(agent.hasPrefix("Courier/\(CourierInfo.version)"))
        #expect(agent.contains("libcurl/"))
        #expect(echo["headers"]["Accept-Language"].stringValue?.isEmpty == false)
        #expect(echo["headers"]["Accept-Encoding"].stringValue?.contains("gzip") == true)
    }

    @Test func sessionAndCallHeadersAreSentCallHeadersWin() async throws {
        let api = try await httpbinManager { $0.additionalHeaders = ["X-From-Config": "c", "X-Both": "config"] }
        api.additionalHeaders["X-Session"] = "s"
        let echo: JSON = try await api.GET("headers", headers: ["X-Both": "call", "User-Agent": "mine/1"])
        #expect(echo["headers"]["X-From-Config"] == "c")
        #expect(echo["headers"]["X-Session"] == "s")
        #expect(echo["headers"]["X-Both"] == "call")
        #expect(echo["headers"]["User-Agent"] == "mine/1")
    }
}

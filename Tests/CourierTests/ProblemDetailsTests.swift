import Foundation
import Testing

@testable import Courier

/// RFC 9457 problems in failed responses, from the fault server's `/problem/<status>`.
@Suite struct ProblemDetailsTests {
    @Test func aProblemResponseIsOnTheErrorWithEveryMember() async throws {
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let error = await capturedError { let _: JSON = try await api.GET("problem/403") }
        let courier = try #require(error as? CourierError)
        guard case .unacceptableStatusCode = courier else {
            Issue.record("expected unacceptableStatusCode, got \(courier)")
            return
        }
        let problem = try #require(courier.problem)
        #expect(problem.type == "https://example.com/probs/out-of-credit")
        #expect(problem.title == "You do not have enough credit.")
        #expect(problem.status == 403)
        #expect(problem.detail == "Your current balance is 30, but that costs 50.")
        #expect(problem.instance == "/account/12345/msgs/abc")
        #expect(problem.extensions["balance"] == 30)
        #expect(problem.extensions["accounts"] == ["/account/12345", "/account/67890"])
        #expect(problem.extensions["type"] == nil)
    }

    @Test func membersOfTheWrongTypeAreLeftOut() async throws {
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let error = await capturedError {
            let _: JSON = try await api.GET("problem/500", parameters: ["bad-types": ""])
        }
        let problem = try #require((error as? CourierError)?.problem)
        #expect(problem.title == nil)
        #expect(problem.status == nil)
        #expect(problem.extensions["title"] == nil)
        #expect(problem.type == "https://example.com/probs/out-of-credit")
    }

    @Test func anErrorWithoutAProblemBodyHasNone() async throws {
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let error = await capturedError { let _: JSON = try await api.GET("status/404") }
        let courier = try #require(error as? CourierError)
        #expect(courier.response?.status.code == 404)
        #expect(courier.problem == nil)
        // A problem without a type is about:blank.
        #expect(ProblemDetails(json: Data(#"{"status": 404}"#.utf8))?.type == "about:blank")
        #expect(ProblemDetails(json: Data("[1]".utf8)) == nil)
    }
}

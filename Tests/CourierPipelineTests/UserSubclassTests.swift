import Courier
import CourierTesting
import Foundation
import HTTPTypes
import Testing

// How an app tests its own API client with `CourierTesting` alone: no server, no package
// internals. The DocC articles APIClientSubclass and TestingWithCourierTesting (and so
// Documentation/Usage.md, made from them) show this code.

struct Forecast: Codable, Sendable, Equatable {
    var city: String
    var celsius: Double
}

enum WeatherError: Error, Equatable {
    case signedOut
}

/// The app's client: a subclass that signs requests and turns a 401 into its own error.
final class WeatherAPI: HTTPSessionManager {
    var token: String?

    nonisolated init(configuration: HTTPSessionConfiguration = .default) {
        super.init(baseURL: URL(string: "https://weather.example.com/v2/"), configuration: configuration)
    }

    override func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
        var request = request
        if let token { request.headerFields[.authorization] = "Bearer \(token)" }
        return request
    }

    override func process(_ response: RawResponse) async throws -> RawResponse {
        if response.status == .unauthorized { throw WeatherError.signedOut }
        return response
    }

    func forecast(for city: String) async throws -> Forecast {
        try await GET("forecast", parameters: ["city": city], as: Forecast.self)
    }

    func report(_ forecast: Forecast) async throws {
        requestSerializer = JSONRequestSerializer()
        let _: JSON = try await POST("reports", parameters: forecast)
    }
}

@Suite struct UserSubclassTests {
    /// The client on a stub transport.
    func client(_ stub: StubTransport) -> WeatherAPI {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        return WeatherAPI(configuration: configuration)
    }

    @Test func forecastSendsTheTokenAndDecodes() async throws {
        let stub = StubTransport()
        stub.stub(.get, "forecast", with: .json(#"{"city": "Vienna", "celsius": 21.5}"#))
        let api = client(stub)
        await api.setToken("abc")
        let forecast = try await api.forecast(for: "Vienna")
        #expect(forecast == Forecast(city: "Vienna", celsius: 21.5))
        let sent = try #require(stub.requests.first)
        #expect(sent.request.headerFields[.authorization] == "Bearer abc")
        #expect(sent.path == "/v2/forecast")
        #expect(sent.queryItems == [URLQueryItem(name: "city", value: "Vienna")])
    }

    @Test func aRejectedTokenBecomesTheAppsError() async throws {
        let stub = StubTransport()
        stub.stub(.get, "forecast", with: .status(.unauthorized))
        let api = client(stub)
        await #expect(throws: WeatherError.signedOut) { try await api.forecast(for: "Graz") }
    }

    @Test func reportsAreSentAsJSON() async throws {
        let stub = StubTransport()
        stub.stub(.post, "reports", with: .json("{}", status: .created))
        let api = client(stub)
        try await api.report(Forecast(city: "Linz", celsius: -3))
        let sent = try #require(stub.requests.first)
        #expect(sent.request.headerFields[.contentType] == "application/json")
        let body = try JSONDecoder().decode(Forecast.self, from: sent.body ?? Data())
        #expect(body == Forecast(city: "Linz", celsius: -3))
    }

    @Test func anOfflineNetworkIsTheEnginesError() async throws {
        let stub = StubTransport()
        stub.stub(.get, "forecast", with: .failure(.cannotConnect))
        let api = client(stub)
        await #expect {
            try await api.forecast(for: "Wels")
        } throws: { error in
            if case .cannotConnect = error as? CourierError { true } else { false }
        }
    }
}

extension WeatherAPI {
    func setToken(_ token: String?) { self.token = token }
}

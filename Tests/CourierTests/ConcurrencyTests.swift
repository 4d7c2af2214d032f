import Courier
import Foundation
import Testing

@Suite struct ConcurrencyTests {
    @Test func fiveHundredConcurrentRequestsOnOneManager() async throws {
        let api = try await httpbinManager { $0.maximumConnectionsPerHost = 32 }
        let results = try await withThrowingTaskGroup(of: (Int, JSON).self) { group in
            for index in 0..<500 {
                group.addTask { (index, try await api.GET("anything", parameters: ["i": .int(index)])) }
            }
            var results: [Int: JSON] = [:]
            for try await (index, echo) in group { results[index] = echo }
            return results
        }
        #expect(results.count == 500)
        for (index, echo) in results { #expect(echo["args"]["i"] == .string(String(index))) }
    }

    @Test func concurrentManagersDoNotInterfere() async throws {
        let httpbin = try await TestServers.httpbin()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let api = HTTPSessionManager(baseURL: httpbin, configuration: .ephemeral)
                    for step in 0..<10 {
                        let echo: JSON = try await api.GET("get", parameters: ["m": .int(index), "s": .int(step)])
                        #expect(echo["args"] == ["m": .string(String(index)), "s": .string(String(step))])
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func settingsCanChangeWhileRequestsRun() async throws {
        let api = try await httpbinManager()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<50 {
                group.addTask {
                    api.additionalHeaders["X-Index"] = String(index)
                    let echo: JSON = try await api.GET("headers")
                    #expect(echo["headers"]["X-Index"].stringValue != nil)
                }
            }
            try await group.waitForAll()
        }
    }
}

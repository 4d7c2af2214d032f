import Courier
import Foundation
import Testing

/// The query and form encoding options, as servers receive them: the raw query from the fault
/// server's `/echo`, a form as httpbin parses it.
@Suite struct QueryEncodingOptionsTests {
    private func query(_ options: QueryEncodingOptions, _ parameters: JSON) async throws -> String {
        let api = try await faultManager()
        api.requestSerializer = HTTPRequestSerializer(encoding: options)
        let echo: JSON = try await api.GET("echo", parameters: parameters)
        return try #require(echo["query"].stringValue)
    }

    @Test func theDefaultsStayAFNetworkings() async throws {
        let sent = try await query(QueryEncodingOptions(), ["tags": ["a", "b"], "on": true, "full name": "Ada L"])
        #expect(sent == "full%20name=Ada%20L&on=1&tags%5B%5D=a&tags%5B%5D=b")
    }

    @Test func arraysBooleansAndSpacesAsAsked() async throws {
        let parameters: JSON = ["tags": ["a", "b"], "on": true, "off": false, "full name": "Ada L+"]
        #expect(
            try await query(
                QueryEncodingOptions(arrays: .noBrackets, booleans: .literal, spaces: .plusReplaced), parameters)
                == "full+name=Ada+L%2B&off=false&on=true&tags=a&tags=b")
        #expect(
            try await query(QueryEncodingOptions(arrays: .indexInBrackets), ["tags": ["a", "b"]])
                == "tags%5B0%5D=a&tags%5B1%5D=b")
    }

    @Test func keysAreWrittenTheWayAsked() async throws {
        let parameters: JSON = ["userName": "ada", "profileURL": ["homePage": "x"]]
        #expect(
            try await query(QueryEncodingOptions(keys: .convertToSnakeCase), parameters)
                == "profile_url%5Bhome_page%5D=x&user_name=ada")
        #expect(
            try await query(QueryEncodingOptions(keys: .convertToKebabCase), parameters)
                == "profile-url%5Bhome-page%5D=x&user-name=ada")
        #expect(
            try await query(QueryEncodingOptions(keys: .custom { "x_" + $0 }), ["a": 1]) == "x_a=1")
    }

    @Test func aFormBodyUsesTheSameOptionsAndAServerReadsIt() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = HTTPRequestSerializer(
            encoding: QueryEncodingOptions(arrays: .noBrackets, booleans: .literal, spaces: .plusReplaced))
        let echo: JSON = try await api.POST("post", parameters: ["tags": ["a", "b"], "on": true, "name": "Ada L"])
        #expect(echo["form"]["tags"] == ["a", "b"])
        #expect(echo["form"]["on"] == "true")
        #expect(echo["form"]["name"] == "Ada L")
    }
}

import CourierStorage
import Foundation
import Testing

/// The three HTTP date forms (RFC 9110 section 5.6.7) and the looser ones cookies use, against
/// known instants; anything that is not a date is nil (an `Expires` of nil means "already
/// expired" to the cache).
@Suite struct HTTPDateTests {
    @Test(arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777.0),  // IMF-fixdate
        ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),  // RFC 850
        ("Sun Nov  6 08:49:37 1994", 784_111_777),  // asctime
        ("Thu, 29 Feb 2024 12:00:00 GMT", 1_709_208_000),  // a leap day
        ("Wed, 21-Oct-2015 07:28:00 GMT", 1_445_412_480),  // cookies' dashed form, four-digit year
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
        ("Fri, 31 Dec 2badly 23:59:59 GMT 2049", 2_524_607_999),  // tolerant: first year-like token
        ("  Tue, 15 Nov 1994 12:45:26 GMT  ", 784_903_526),
        ("tue, 15 nov 1994 12:45:26 gmt", 784_903_526),
    ])
    func parsesTheHTTPForms(text: String, seconds: Double) {
        #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: seconds))
    }

    @Test(arguments: [
        "", "0", "-1", "yesterday", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 GMT",
        "Sun, 06 Nov 1500 08:49:37 GMT",
    ])
    func rejectsWhatIsNotADate(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }
}

/// The strict reading a cache gives `Expires`: exactly one of the three forms, or nothing.
@Suite struct StrictHTTPDateTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)  // November 2023

    @Test(arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777.0),
        ("sun, 06 nov 1994 08:49:37 gmt", 784_111_777),
        ("Sun Nov  6 08:49:37 1994", 784_111_777),
        ("Wed Nov 16 08:49:37 1994", 784_975_777),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
    ])
    func readsExactlyTheThreeForms(text: String, seconds: Double) {
        #expect(HTTPDate.parseStrict(text, now: Self.now) == Date(timeIntervalSince1970: seconds))
    }

    @Test(arguments: [
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", " Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06-Nov-1994 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT", "0", "", "Sun, 06 Nov 1994 25:00:00 GMT",
    ])
    func refusesEverythingElse(text: String) {
        #expect(HTTPDate.parseStrict(text, now: Self.now) == nil)
    }

    /// A two-digit year is the one at most 50 years ahead of now.
    @Test func aTwoDigitYearIsWithinFiftyYearsAhead() {
        let soon = HTTPDate.parseStrict("Wednesday, 01-Jan-70 00:00:00 GMT", now: Self.now)
        #expect(soon == Date(timeIntervalSince1970: 3_155_760_000))  // 2070
        let past = HTTPDate.parseStrict("Monday, 01-Jan-90 00:00:00 GMT", now: Self.now)
        #expect(past == Date(timeIntervalSince1970: 631_152_000))  // 1990
    }
}

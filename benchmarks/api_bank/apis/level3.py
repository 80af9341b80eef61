"""API-Bank level-3 APIs (suite ``"lv3"``): the in-memory services of the 50 "Plan+Retrieve+Call" tasks.

The original level-3 APIs hold small fixed tables in code rather than in ``init_database/``; the tables below
are those values (users, meetings, flights, hotels, coordinates, ...), as the benchmark defines them and as
the recorded level-3 results show. Comparison: output, exception and inputs, except where noted.
"""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.api_bank.apis.base import Api, ApiError, register_api, require_text, strict_datetime
from genenv.benchmarks.api_bank.apis.info import evaluate_formula

__all__ = []  # the API classes are reached by name through API_CLASSES (register_api)

_USERS = {"John": ("123456", "john@example.com", "1234567890"), "Mary": ("abcdef", "mary@example.com", "0987654321"),
          "Peter": ("qwerty", "peter@example.com", "1231231234"), "Tom": ("asdfgh", "tom@example.com", "4564564567"),
          "Jerry": ("zxcvbn", "jerry@example.com", "7897897890")}
_MEETING_1 = {"meeting_id": 1, "meeting_name": "Meeting with the client", "meeting_time": "2021-01-01 10:00:00",
              "meeting_location": "Room 1", "meeting_attendees": ["John", "Mary", "Peter"]}
_MEETING_2 = {"meeting_id": 2, "meeting_name": "Meeting about the new project", "meeting_time": "2021-01-02 10:00:00",
              "meeting_location": "Room 2", "meeting_attendees": ["John", "Mary", "Peter"]}
_MEETING_TJ = {"meeting_id": 1, "meeting_name": "Meeting", "meeting_time": "2021-01-01 10:00:00",
               "meeting_location": "Room 1", "meeting_attendees": ["Tom", "Jerry"]}
_MEETINGS = {"John": [_MEETING_1, _MEETING_2], "Mary": [_MEETING_1, _MEETING_2], "Peter": [_MEETING_1, _MEETING_2],
             "Tom": [_MEETING_TJ], "Jerry": [_MEETING_TJ]}
_FLIGHTS = [("New York", "San Francisco", "2022-01-01"), ("Los Angeles", "San Francisco", "2022-01-02"),
            ("London", "San Francisco", "2022-01-03"), ("New York", "London", "2022-01-04"),
            ("New York", "Los Angeles", "2022-01-05")]
_HOTELS = [("2022-01-01", "2022-01-02"), ("2022-01-02", "2022-01-03"), ("2022-01-03", "2022-01-04"),
           ("2022-01-04", "2022-01-05"), ("2022-01-05", "2022-01-06")]
_PLACES = {"New York City": (40.7128, 74.0060), "San Francisco": (37.7749, 122.4194), "London": (51.5074, 0.1278),
           "Paris": (48.8566, 2.3522), "Tokyo": (35.6762, 139.6503)}
_WEATHER = {(40.7128, 74.0060): (10, 0.5, "Clear"), (37.7749, 122.4194): (20, 0.8, "Cloudy"),
            (51.5074, 0.1278): (5, 0.9, "Rainy"), (48.8566, 2.3522): (15, 0.7, "Sunny"),
            (35.6762, 139.6503): (25, 0.6, "Rainy")}
_SALARIES = {"Financial Analyst": 100000, "Software Engineer": 120000, "Data Scientist": 150000,
             "Product Manager": 130000, "Doctor": 200000}
_GENRES = {"Action": ["The Dark Knight", "The Matrix", "The Lord of the Rings"],
           "Comedy": ["The Hangover", "Knives Out", "Deadpool"],
           "Drama": ["The Shawshank Redemption", "Forrest Gump", "Joker"],
           "Romance": ["Titanic", "La La Land", "The Notebook"], "Thriller": ["Inception", "Parasite", "Get Out"]}
_MEMBERS = {"Alibaba": ["John", "Mary", "Peter"], "Tencent": ["Tom", "Jerry"], "Baidu": ["Jack", "Rose"],
            "ByteDance": ["Bob", "Alice"], "JD": ["Mike", "Jane"]}
_STATUS = {"John": "Traveling", "Mary": "Working from home", "Peter": "Working from office", "Tom": "Traveling",
           "Jerry": "Working from home", "Jack": "Working from office", "Rose": "Working from office",
           "Bob": "Traveling", "Alice": "Working from home", "Mike": "Working from office",
           "Jane": "Working from office"}
_POSTS = {1: [1, 2, 3], 2: [4, 5, 6], 3: [7, 8, 9], 4: [10, 11, 12], 5: [13, 14, 15]}
_WATCHED = {"John": ["The Matrix", "The Lord of the Rings", "The Dark Knight"],
            "Mary": ["The Lord of the Rings", "The Dark Knight", "The Matrix"],
            "Peter": ["The Matrix", "The Lord of the Rings", "The Dark Knight"],
            "Tom": ["The Lord of the Rings", "The Dark Knight", "The Matrix"],
            "Jerry": ["The Matrix", "The Lord of the Rings", "The Dark Knight"]}
_PREFERENCES = {"John": ["Action", "Comedy", "Drama"], "Mary": ["Comedy", "Drama", "Romance"],
                "Peter": ["Action", "Drama", "Thriller"], "Tom": ["Action", "Comedy", "Drama"],
                "Jerry": ["Comedy", "Drama", "Romance"]}
_RESTAURANTS = [{"name": "Restaurant A", "coordinates": (40.7128, 74.006)},
                {"name": "Restaurant B", "coordinates": (37.7749, 122.4194)},
                {"name": "Restaurant C", "coordinates": (40.7128, 74.006)},
                {"name": "Restaurant D", "coordinates": (37.7749, 122.4194)}]


def _lookup(table: dict, key: Any, what: str) -> Any:
    if key not in table:
        raise ApiError(f"{what} {key!r} not found.")
    return table[key]


class _Lv3(Api):
    suite = "lv3"


def _user(username: str, password: str) -> tuple[str, str, str]:
    record = _USERS.get(username)
    if record is None or record[0] != password:
        raise ApiError("User not found.")
    return record


@register_api
class AccountInfo(_Lv3):
    """``AccountInfo(username, password)`` -> ``{email, phone}``."""

    name = "AccountInfo"

    def run(self, rt, username: str, password: str) -> Any:
        _, email, phone = _user(username, password)
        return {"email": email, "phone": phone}


@register_api
class PersonalInfoUpdate(_Lv3):
    """``PersonalInfoUpdate(username, password, address)`` -> ``{"status": "success"}``."""

    name = "PersonalInfoUpdate"

    def run(self, rt, username: str, password: str, address: str) -> Any:
        _user(username, password)
        rt.memory.setdefault("addresses", {})[username] = address
        return {"status": "success"}


@register_api
class Lv3AddMeeting(_Lv3):
    """``AddMeeting(meeting_topic, start_time, end_time, location, attendees)`` -> ``"success"``."""

    name = "AddMeeting"

    def run(self, rt, meeting_topic: str, start_time: str, end_time: str, location: str, attendees: list) -> Any:
        strict_datetime(start_time)
        strict_datetime(end_time)
        require_text(meeting_topic, "Meeting Topic should not be null")
        rt.memory.setdefault("meetings", []).append(
            {"meeting_topic": meeting_topic, "start_time": start_time, "end_time": end_time, "location": location,
             "attendees": attendees})
        return "success"


@register_api
class Lv3QueryMeeting(_Lv3):
    """``QueryMeeting(user_name)`` -> ``{"meetings": [...]}`` of the user."""

    name = "QueryMeeting"

    def run(self, rt, user_name: str) -> Any:
        return {"meetings": [dict(m) for m in _lookup(_MEETINGS, user_name, "User")]}


@register_api
class EmailReminder(_Lv3):
    """``EmailReminder(content, time, location, recipient)`` -> ``"success"`` (nothing is sent)."""

    name = "EmailReminder"

    def run(self, rt, content: str, time: str, location: str, recipient: str) -> Any:
        strict_datetime(time)
        require_text(content, "Content should not be empty")
        return "success"


@register_api
class Lv3Calculator(_Lv3):
    """``Calculator(formula)``: as the level-1/2 Calculator."""

    name = "Calculator"

    def run(self, rt, formula: str) -> Any:
        return evaluate_formula(formula)


@register_api
class ClothingRecommendation(_Lv3):
    """``ClothingRecommendation(temperature, humidity, weather_conditions)`` -> ``{"clothing_options": [...]}``
    (temperature bands <10, <20, <30, >=30; humidity > 70 adds rain gear; "rain" adds a raincoat)."""

    name = "ClothingRecommendation"

    def run(self, rt, temperature: float, humidity: float, weather_conditions: str) -> Any:
        if temperature < 10:
            options = ["Warm coat", "Hat", "Gloves"]
        elif temperature < 20:
            options = ["Light jacket", "Long-sleeved shirt"]
        elif temperature < 30:
            options = ["T-shirt", "Shorts"]
        else:
            options = ["Sun hat", "Sunglasses", "Loose-fitting clothes"]
        if humidity > 70:
            options += ["Umbrella", "Waterproof shoes"]
        if "rain" in weather_conditions.lower():
            options.append("Raincoat")
        return {"clothing_options": options}


@register_api
class FlightSearch(_Lv3):
    """``FlightSearch(source, destination, travel_dates)`` -> ``{"flights": [...]}`` (12:00-15:00 flights)."""

    name = "FlightSearch"

    def run(self, rt, source: str, destination: str, travel_dates: str) -> Any:
        day = strict_datetime(travel_dates, "%Y-%m-%d").strftime("%Y-%m-%d")
        return {"flights": [{"source": s, "destination": d, "departure_date": f"{f} 12:00:00",
                             "arrival_date": f"{f} 15:00:00"}
                            for s, d, f in _FLIGHTS if (s, d, f) == (source, destination, day)]}


@register_api
class Geocoding(_Lv3):
    """``Geocoding(address)`` -> ``{latitude, longitude}`` of a known city."""

    name = "Geocoding"

    def run(self, rt, address: str) -> Any:
        lat, lon = _lookup(_PLACES, address, "Address")
        return {"latitude": lat, "longitude": lon}


@register_api
class GetWeatherForCoordinates(_Lv3):
    """``GetWeatherForCoordinates(latitude, longitude)`` -> ``{temperature, humidity, description}``."""

    name = "GetWeatherForCoordinates"

    def run(self, rt, latitude: float, longitude: float) -> Any:
        temperature, humidity, description = _lookup(_WEATHER, (latitude, longitude), "Coordinates")
        return {"temperature": temperature, "humidity": humidity, "description": description}


@register_api
class GetOccupationSalary(_Lv3):
    """``GetOccupationSalary(occupation)`` -> ``{"salary": n}``."""

    name = "GetOccupationSalary"

    def run(self, rt, occupation: str) -> Any:
        if occupation not in _SALARIES:
            raise ApiError("The occupation is not in the database.")
        return {"salary": _SALARIES[occupation]}


@register_api
class HotelAvailability(_Lv3):
    """``HotelAvailability(destination, check_in_date, check_out_date)`` -> ``{"hotels": [...]}`` of the
    San Francisco hotels whose free window contains the stay."""

    name = "HotelAvailability"

    def run(self, rt, destination: str, check_in_date: str, check_out_date: str) -> Any:
        start = strict_datetime(check_in_date, "%Y-%m-%d")
        end = strict_datetime(check_out_date, "%Y-%m-%d")
        hotels = []
        for h_in, h_out in _HOTELS:
            if destination == "San Francisco" and start >= strict_datetime(h_in, "%Y-%m-%d") \
                    and end <= strict_datetime(h_out, "%Y-%m-%d"):
                hotels.append({"destination": destination, "check_in_date": h_in, "check_out_date": h_out})
        return {"hotels": hotels}


@register_api
class LikeCount(_Lv3):
    """``LikeCount(post_id)`` -> ``{"like_count": 10 * post_id}`` for posts 1-15."""

    name = "LikeCount"

    def run(self, rt, post_id: int) -> Any:
        if not 1 <= post_id <= 15:
            raise ApiError(f"Post with ID {post_id} does not exist.")
        return {"like_count": 10 * post_id}


@register_api
class MovieRecommendations(_Lv3):
    """``MovieRecommendations(preferences)`` -> ``{"recommended_movies": [...]}`` of the genres, in order."""

    name = "MovieRecommendations"

    def run(self, rt, preferences: list) -> Any:
        return {"recommended_movies": [m for g in preferences for m in _lookup(_GENRES, g, "Genre")]}


@register_api
class NearbyRestaurants(_Lv3):
    """``NearbyRestaurants(latitude, longitude, distance)`` -> ``{"restaurants": [...]}`` (a fixed list)."""

    name = "NearbyRestaurants"

    def run(self, rt, latitude: float, longitude: float, distance: int) -> Any:
        return {"restaurants": [dict(r) for r in _RESTAURANTS]}


@register_api
class OrganizationMembers(_Lv3):
    """``OrganizationMembers(organization)`` -> ``{"members": [...]}``."""

    name = "OrganizationMembers"

    def run(self, rt, organization: str) -> Any:
        return {"members": list(_lookup(_MEMBERS, organization, "Organization"))}


@register_api
class TaxCalculator(_Lv3):
    """``TaxCalculator(salary)`` -> ``{"salary_after_tax": x}`` (rate 0.3 from 5000, 0.2 from 3000, 0.1 from 1000)."""

    name = "TaxCalculator"

    def run(self, rt, salary: float) -> Any:
        if salary < 0:
            raise ApiError("The salary cannot be negative.")
        rate = 0.3 if salary >= 5000 else 0.2 if salary >= 3000 else 0.1 if salary >= 1000 else 0.0
        return {"salary_after_tax": salary - salary * rate}


@register_api
class TravelStatus(_Lv3):
    """``TravelStatus(member_name)`` -> the member's status text."""

    name = "TravelStatus"

    def run(self, rt, member_name: str) -> Any:
        return _lookup(_STATUS, member_name, "Member")


@register_api
class UserPosts(_Lv3):
    """``UserPosts(user_id)`` -> ``{"post_ids": [...]}``."""

    name = "UserPosts"

    def run(self, rt, user_id: int) -> Any:
        return {"post_ids": list(_lookup(_POSTS, user_id, "User"))}


@register_api
class UserWatchedMovies(_Lv3):
    """``UserWatchedMovies(user_name)`` -> the list of watched movies."""

    name = "UserWatchedMovies"

    def run(self, rt, user_name: str) -> Any:
        if user_name not in _WATCHED:
            raise ApiError("User not found.")
        return list(_WATCHED[user_name])


@register_api
class UserMoviePreferences(_Lv3):
    """``UserMoviePreferences(user_name)`` -> ``{"preferences": [...]}`` (genres)."""

    name = "UserMoviePreferences"

    def run(self, rt, user_name: str) -> Any:
        return {"preferences": list(_lookup(_PREFERENCES, user_name, "User"))}

"""What the TravelPlanner agent is shown: the plan format, the sole-planning system prompt and its demonstrated
turn (validation query 1, text only in our data, so never an evaluated task), the two-stage tool instructions, and
the six tools as function descriptions."""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.travelplanner.db import TOOLS
from genenv.benchmarks.travelplanner.plan import plan_text

__all__ = [
    "DEMO_PLAN", "DEMO_QUERY", "DEMO_REFERENCE", "SOLE_SYSTEM", "TWO_STAGE_SYSTEM", "sole_user_turn", "tool_schemas",
]


def tool_schemas() -> list[dict[str, Any]]:
    """The six tools as function descriptions (``name``, ``description``, ``parameters``)."""
    descriptions = {
        "FlightSearch": "Flights from a city to a city on a date (YYYY-MM-DD).",
        "GoogleDistanceMatrix": "Duration, distance and cost of self-driving or a taxi between two cities.",
        "AccommodationSearch": "Accommodations in a city.", "RestaurantSearch": "Restaurants in a city.",
        "AttractionSearch": "Attractions in a city.", "CitySearch": "The cities of a state.",
    }
    return [{"name": name, "description": descriptions[name], "parameters": list(params)}
            for name, params in TOOLS.items()]


PLAN_FORMAT = (
    "Write the plan as a JSON list with one object per day and the keys \"days\", \"current_city\", "
    "\"transportation\", \"breakfast\", \"attraction\", \"lunch\", \"dinner\", \"accommodation\". Write every place "
    "as \"Name, City\" exactly as in the information; separate attractions with \";\"; write \"-\" when there is "
    "nothing. On a travel day current_city is \"from A to B\" and transportation is copied from the information "
    "(\"Flight Number: F..., from A to B, Departure Time: ..., Arrival Time: ...\" or \"Self-driving, from A to B, "
    "...\" or \"Taxi, from A to B, ...\"). Every other day needs breakfast, an attraction, lunch and dinner; every "
    "day but the last needs an accommodation; the last day returns to the origin. Never repeat a restaurant or an "
    "attraction, never mix self-driving with flights or taxis, stay at least an accommodation's minimum nights, "
    "and keep to the budget and the query's requirements.")
SOLE_SYSTEM = ("You are a travel planner. Plan the trip in the query using only the reference information. "
               + PLAN_FORMAT + " Reply with the JSON list only.")
# The demonstrated turn: validation query 1 of the benchmark (text only in our data, so never an evaluated task),
# with an excerpt of its real reference information and a plan that passes every check (tests verify both).
DEMO_QUERY = ("Please create a travel plan for me where I'll be departing from Washington and heading to Myrtle Beach "
              "for a 3-day trip from March 13th to March 15th, 2022. Can you help me keep this journey within a "
              "budget of $1,400?")
DEMO_REFERENCE = """Attractions in Myrtle Beach:
Name
SkyWheel Myrtle Beach
WonderWorks Myrtle Beach
Family Kingdom Amusement Park
(first 3 of 20 shown)

Restaurants in Myrtle Beach:
Name | Average Cost | Cuisines
The Night Owl | 12 | Desserts, Tea, American, Bakery, Indian, Seafood
Catfish Charlie's | 14 | Tea, Chinese, Desserts
La Pino'z Pizza | 14 | Cafe, Seafood, Fast Food
Nagai | 19 | Desserts, Pizza, Mexican, Fast Food, American, Seafood
First Eat | 21 | Tea, Mexican, Fast Food
(first 5 of 28 shown)

Accommodations in Myrtle Beach:
NAME | price | room type | house_rules | minimum nights | maximum occupancy
Greenwich Village Apartment | 781 | Entire home/apt | No parties & No pets | 3 | 6
Yellow submarine | 179 | Private room | No pets & No visitors & No children under 10 | 2 | 2
(first 2 of 19 shown)

Flight from Washington to Myrtle Beach on 2022-03-13:
There is no flight from Washington to Myrtle Beach on 2022-03-13.

Self-driving from Washington to Myrtle Beach:
self-driving, from Washington to Myrtle Beach, duration: 6 hours 47 mins, distance: 693 km, cost: 34

Taxi from Washington to Myrtle Beach:
taxi, from Washington to Myrtle Beach, duration: 6 hours 47 mins, distance: 693 km, cost: 693

Flight from Myrtle Beach to Washington on 2022-03-15:
There is no flight from Myrtle Beach to Washington on 2022-03-15.

Self-driving from Myrtle Beach to Washington:
self-driving, from Myrtle Beach to Washington, duration: 6 hours 45 mins, distance: 693 km, cost: 34

Taxi from Myrtle Beach to Washington:
taxi, from Myrtle Beach to Washington, duration: 6 hours 45 mins, distance: 693 km, cost: 693"""
DEMO_PLAN = [
    {"days": 1, "current_city": "from Washington to Myrtle Beach",
     "transportation": "Self-driving, from Washington to Myrtle Beach, duration: 6 hours 47 mins, distance: 693 km, "
                       "cost: 34", "breakfast": "-", "attraction": "-", "lunch": "-",
     "dinner": "Nagai, Myrtle Beach", "accommodation": "Yellow submarine, Myrtle Beach"},
    {"days": 2, "current_city": "Myrtle Beach", "transportation": "-", "breakfast": "The Night Owl, Myrtle Beach",
     "attraction": "SkyWheel Myrtle Beach, Myrtle Beach;WonderWorks Myrtle Beach, Myrtle Beach;",
     "lunch": "Catfish Charlie's, Myrtle Beach", "dinner": "La Pino'z Pizza, Myrtle Beach",
     "accommodation": "Yellow submarine, Myrtle Beach"},
    {"days": 3, "current_city": "from Myrtle Beach to Washington",
     "transportation": "Self-driving, from Myrtle Beach to Washington, duration: 6 hours 45 mins, distance: 693 km, "
                       "cost: 34", "breakfast": "First Eat, Myrtle Beach", "attraction": "-", "lunch": "-",
     "dinner": "-", "accommodation": "-"},
]


def sole_user_turn(reference: str, query: str) -> str:
    """The user message of sole planning: the reference information, then the query."""
    return f"Reference information:\n{reference}\n\nQuery: {query}"


TWO_STAGE_SYSTEM = (
    "You are a travel planner with search tools over a travel database. Each reply is exactly one action:\n"
    "FlightSearch[Departure City, Destination City, Date]: flights on a date (YYYY-MM-DD).\n"
    "GoogleDistanceMatrix[Origin, Destination, Mode]: self-driving or taxi duration, distance and cost "
    "(Mode is self-driving or taxi).\n"
    "AccommodationSearch[City], RestaurantSearch[City], AttractionSearch[City]: what a city offers.\n"
    "CitySearch[State]: the cities of a state.\n"
    "Search for the cities, transport, restaurants, attractions and accommodations you need, one action per "
    "reply, then reply with the plan instead of an action. " + PLAN_FORMAT + "\n\n"
    "Example. Query: a 3-day trip from Washington to Myrtle Beach, March 13-15, 2022, for one person.\n"
    "Your first replies: AttractionSearch[Myrtle Beach], then RestaurantSearch[Myrtle Beach], then "
    "AccommodationSearch[Myrtle Beach], then FlightSearch[Washington, Myrtle Beach, 2022-03-13], then "
    "GoogleDistanceMatrix[Washington, Myrtle Beach, self-driving], ... and finally the plan:\n" + plan_text(DEMO_PLAN))

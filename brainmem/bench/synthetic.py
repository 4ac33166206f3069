"""The embedded synthetic benchmark: the default, needing no download.

A fictional user talks to an agent over nine months (90 sessions). Mixed into
ordinary chatter are a few hundred facts about the people in the user's life
(where they live, what they do, their pets, cars, allergies, ...) and about the
user. Questions then probe four abilities, one category each:

- ``single-hop``: one fact answers it and the question shares some content words
  with it (never its exact wording);
- ``paraphrase``: one fact answers it but the question words it differently, so
  only the person's name is shared;
- ``knowledge-update``: the fact changed (an older and a newer statement, months
  apart, similarly worded); the evidence is the *newer* one only;
- ``multi-hop``: two facts are needed ("my dentist is Omar" + "Omar moved to
  Porto" for "where does my dentist live?"); the evidence is both.

Everything is drawn from ``random.Random(seed)`` over fixed word lists, so the
dataset is the same on every machine and builds in a few milliseconds.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from .dataset import Dataset, Document, Haystack, Question

__all__ = ["CATEGORIES", "build_synthetic", "load_synthetic"]

CATEGORIES = ("single-hop", "paraphrase", "knowledge-update", "multi-hop")

START = datetime(2024, 1, 8, tzinfo=timezone.utc)

NAMES = """Amara Bastian Chiara Dmitri Elif Farid Greta Hiroshi Ingrid Jonas Kalani Leandro
Marisol Nikolai Oona Pavel Quentin Rosalind Soren Tamsin Ulrich Valentina Wendell Ximena
Yusuf Zofia Anouk Bertrand Cosima Dariusz Esme Florian Gwendolyn Horatio Isolde Jasper
Katarina Lorcan Mireille Nadia Osvaldo Priya Rafferty Saoirse Thaddeus Ulla Vesna Wilhelmina""".split()

VALUES = {
    "city": """Lisbon Porto Oslo Tallinn Valencia Montreal Kyoto Edinburgh Ljubljana Marseille
    Hamburg Wellington Cork Bologna Seville Tbilisi Krakow Gothenburg Antwerp Halifax Adelaide
    Trieste Bergen Vilnius Salzburg""".split(),
    "job": """pharmacist architect paramedic sommelier cartographer veterinarian locksmith
    translator electrician archivist geologist midwife carpenter radiographer florist
    actuary welder librarian""".split(),
    "hobby": """bouldering pottery birdwatching fencing beekeeping kayaking calligraphy
    woodturning geocaching orienteering bookbinding astrophotography falconry""".split(),
    "allergy": """peanuts shellfish sesame kiwi strawberries walnuts lupin mustard celery
    buckwheat""".split(),
    "pet": """Biscuit Pickle Mochi Juniper Waffles Pepper Noodle Clementine Sprocket Tofu
    Marmalade Gizmo""".split(),
    "car": """Volvo Subaru Fiat Skoda Mazda Peugeot Renault Tesla Saab Citroen""".split(),
    "instrument": """cello oboe banjo harp clarinet accordion trombone mandolin
    ukulele bassoon""".split(),
}
ANIMALS = "beagle tabby parrot ferret tortoise greyhound rabbit corgi".split()
COLOURS = "red teal grey white black mustard".split()

# attribute -> ((statement, its single-hop question) x 2, paraphrase question, update question).
# Statements take {name} {value} {animal} {colour}; the questions only {name}. A
# single-hop question shares a content word or two with its statement; a
# paraphrase question shares only the name with either statement.
ATTRS: dict[str, tuple[tuple[tuple[str, str], ...], str, str]] = {
    "city": (
        (("{name} just moved to {value} for a new job.", "Which city did {name} move to?"),
         ("Big news: {name} relocated to {value} last month.", "Where did {name} relocate?")),
        "Where is {name} based these days?",
        "Which city is {name} living in now?",
    ),
    "job": (
        (("{name} works as {value} at the moment.", "What does {name} work as?"),
         ("{name} started a new position as {value}.", "What position did {name} start?")),
        "What is {name}'s profession?",
        "What is {name}'s job now?",
    ),
    "hobby": (
        (("{name} has gotten really into {value} lately.", "What has {name} gotten into lately?"),
         ("{name} spends every free weekend on {value}.", "What does {name} spend free weekends on?")),
        "How does {name} pass the time when off duty?",
        "What is {name}'s current hobby?",
    ),
    "allergy": (
        (("{name} is allergic to {value}, so keep them off the menu.", "What is {name} allergic to?"),
         ("Reminder: {name} reacts badly to {value}.", "What does {name} react badly to?")),
        "Which food must I avoid serving {name}?",
        "What is {name} allergic to now?",
    ),
    "pet": (
        (("{name} adopted a {animal} and named it {value}.", "What did {name} name the adopted animal?"),
         ("{name} brought home a {animal} called {value}.", "What is the animal {name} brought home called?")),
        "What is the name of {name}'s furry companion?",
        "What is {name}'s newest pet called?",
    ),
    "car": (
        (("{name} bought a {colour} {value} last week.", "Which car did {name} buy?"),
         ("{name} traded up and now drives a {colour} {value}.", "What does {name} drive?")),
        "What vehicle does {name} get around in?",
        "Which car does {name} have now?",
    ),
    "instrument": (
        (("{name} is learning to play the {value}.", "Which instrument is {name} learning to play?"),
         ("{name} takes weekly {value} lessons now.", "Which lessons does {name} take weekly?")),
        "What music does {name} practise?",
        "Which instrument is {name} playing these days?",
    ),
}
UPDATABLE = ("city", "job", "hobby", "pet", "car", "instrument")

# (statement, single-hop question, paraphrase question) about the user themself
SELF_FACTS = (
    ("I've been using Neovim as my main code editor for years.", "Which code editor do I use?", "What do I write software in?"),
    ("My favourite cuisine is Ethiopian, especially injera on Fridays.", "What is my favourite cuisine?", "What kind of food do I like best?"),
    ("I signed up for the Rotterdam half marathon in October.", "Which half marathon did I sign up for?", "What running event am I registered for?"),
    ("My flat is on Wharf Lane, on the third floor.", "Which lane is my flat on?", "Where is my apartment located?"),
    ("I take my coffee with oat milk and no sugar.", "How do I take my coffee?", "What goes into my morning brew?"),
    ("My laptop is a ThinkPad X1 Carbon.", "What laptop do I have?", "Which computer do I own?"),
    ("I'm reading Middlemarch right now, slowly.", "Which book am I reading right now?", "What novel is on my nightstand?"),
    ("I play badminton every Tuesday evening.", "What sport do I play on Tuesday evenings?", "Which racket game keeps me busy midweek?"),
    ("I'm saving up for a trip to Patagonia next spring.", "Where am I saving up for a trip to?", "Which destination is my travel fund for?"),
    ("My blood type is O negative.", "What is my blood type?", "Which group am I for transfusions?"),
    ("I'm terrified of wasps since childhood.", "What am I terrified of?", "Which insect scares me?"),
    ("My wifi password hint is the name of my first bicycle.", "What is my wifi password hint?", "How do I remember the router login?"),
)

RELATIONS = ("dentist", "landlord", "manager", "barber", "accountant", "neighbour", "mentor",
             "cousin", "yoga instructor", "piano teacher", "running partner", "college roommate",
             "book club host", "plumber", "godmother", "physiotherapist", "tax advisor", "tutor")
RELATION_STATEMENTS = ("My {relation} is {name}.", "{name} is my {relation}, by the way.")
# multi-hop question per attribute: names the relation, never the person
MULTI_HOP_Q = {
    "city": "Which city does my {relation} live in?",
    "job": "What does my {relation} do for a living?",
    "hobby": "What pastime has my {relation} picked up?",
    "allergy": "What should I never cook for my {relation}?",
    "pet": "What is my {relation}'s pet called?",
    "car": "What car does my {relation} have?",
    "instrument": "What instrument does my {relation} play?",
}

CHATTER = (
    "The weather was {adj} today and I {verb} most of the afternoon.",
    "Watched another episode of {show} last night, it was {adj}.",
    "Lunch was {food} again, I need more variety.",
    "Had coffee with {name} this morning, nothing special.",
    "{name} sent me a meme about {topic}, made me laugh.",
    "Work was {adj}; the {topic} meeting ran long.",
    "Can you remind me to {errand} tomorrow?",
    "I {verb} for an hour and then read about {topic}.",
    "Thinking about {topic} a lot this week.",
    "The train was late again, {adj} start to the day.",
    "Ran into {name} at the market, we talked about {topic}.",
    "Any tips for {errand} quickly?",
    "My plants look {adj}, maybe too much water.",
    "{name} recommended a podcast about {topic}.",
    "Ordered {food} for dinner, it was {adj}.",
)
FILL = {
    "adj": "grim lovely odd chaotic quiet exhausting fine brilliant dull hectic".split(),
    "verb": "napped cleaned walked cooked journaled stretched tidied gamed".split(),
    "show": "Severance Slow-Horses Bluey Taskmaster Shogun Columbo".split(),
    "food": "ramen soup falafel dumplings curry pasta tacos salad".split(),
    "topic": "budgets gardening taxes spreadsheets history robots mushrooms trains".split(),
    "errand": ["renew my passport", "call the bank", "buy stamps", "water the plants",
               "book a haircut", "return the parcel", "pay the electricity bill"],
}


def build_synthetic(seed: int = 7, n_sessions: int = 90) -> Dataset:
    """Generate the synthetic dataset (deterministic for a given ``seed``)."""
    rng = random.Random(seed)
    names = list(NAMES)
    rng.shuffle(names)
    people = names[:40]
    # each session is a list of (text, label); a label names a fact for the questions
    sessions: list[list[tuple[str, str | None]]] = [[] for _ in range(n_sessions)]
    early = n_sessions * 2 // 3
    session_of: dict[str, int] = {}

    def place(label: str, text: str, lo: int, hi: int) -> str:
        s = rng.randrange(lo, hi)
        sessions[s].append((text, label))
        session_of[label] = s
        return label

    variant: dict[str, int] = {}
    value_of: dict[str, str] = {}

    def fact(label: str, attr: str, name: str, value: str, lo: int, hi: int) -> str:
        variant[label] = v = rng.randrange(2)
        value_of[label] = value
        stmt = ATTRS[attr][0][v][0]
        if attr == "job":  # "as an archivist", "as a welder"
            value = ("an " if value[0] in "aeiou" else "a ") + value
        text = stmt.format(name=name, value=value, animal=rng.choice(ANIMALS), colour=rng.choice(COLOURS))
        return place(label, text, lo, hi)

    # every person gets every attribute, told in the first two thirds of the months
    facts: dict[tuple[str, str], str] = {}
    for name in people:
        for attr, pool in VALUES.items():
            facts[(name, attr)] = fact(f"{name}/{attr}", attr, name, rng.choice(pool), 0, early)
    # knowledge updates: a new value told at least ten sessions (about a month) later
    pairs = [(n, a) for n in people for a in UPDATABLE]
    rng.shuffle(pairs)
    updates: dict[tuple[str, str], str] = {}
    for name, attr in pairs[:30]:
        lo = min(session_of[facts[(name, attr)]] + 10, n_sessions - 1)
        value = rng.choice([v for v in VALUES[attr] if v != value_of[facts[(name, attr)]]])
        updates[(name, attr)] = fact(f"{name}/{attr}/new", attr, name, value, lo, n_sessions)
    relations: dict[str, tuple[str, str]] = {}
    for relation, name in zip(RELATIONS, rng.sample(people, len(RELATIONS))):
        text = rng.choice(RELATION_STATEMENTS).format(relation=relation, name=name)
        relations[relation] = (name, place(f"rel/{relation}", text, 0, n_sessions))
    self_facts = [place(f"self/{i}", f[0], 0, n_sessions) for i, f in enumerate(SELF_FACTS)]
    # chatter fills every session with 6..14 more turns, at random places
    seen: set[str] = set()
    for sess in sessions:
        for _ in range(rng.randint(6, 14)):
            line = ""
            for _try in range(20):
                fill = {k: rng.choice(v) for k, v in FILL.items()}
                line = rng.choice(CHATTER).format(name=rng.choice(names), **fill)
                if line not in seen:
                    break
            seen.add(line)
            sess.insert(rng.randrange(len(sess) + 1), (line, None))
    docs: list[Document] = []
    doc_of: dict[str, str] = {}
    for i, sess in enumerate(sessions):
        day = START + timedelta(days=3 * i, hours=rng.randint(8, 21), minutes=rng.randrange(60))
        for j, (text, label) in enumerate(sess):
            doc_id = f"s{i + 1:03d}_t{j + 1}"
            docs.append(Document(doc_id, text, f"session_{i + 1}", (day + timedelta(minutes=j)).timestamp()))
            if label is not None:
                doc_of[label] = doc_id
    query_time = max(d.created_at for d in docs) + 86_400.0

    questions: list[Question] = []

    def ask(qid: str, text: str, category: str, *labels: str) -> None:
        questions.append(Question(qid, text, category, query_time, tuple(doc_of[x] for x in labels)))

    keys = [k for k in facts if k not in updates]
    rng.shuffle(keys)
    for i, (name, attr) in enumerate(keys[:80]):
        label = facts[(name, attr)]
        ask(f"single-{i}", ATTRS[attr][0][variant[label]][1].format(name=name), "single-hop", label)
    for i, (name, attr) in enumerate(keys[80:160]):
        ask(f"para-{i}", ATTRS[attr][1].format(name=name), "paraphrase", facts[(name, attr)])
    for i, ((_stmt, single, para), label) in enumerate(zip(SELF_FACTS, self_facts)):
        if i % 2 == 0:
            ask(f"self-{i}", single, "single-hop", label)
        else:
            ask(f"self-{i}", para, "paraphrase", label)
    for i, ((name, attr), label) in enumerate(updates.items()):
        ask(f"update-{i}", ATTRS[attr][2].format(name=name), "knowledge-update", label)
    for relation, (name, rel_label) in relations.items():
        for attr in rng.sample([a for a in VALUES if (name, a) not in updates], 2):
            text = MULTI_HOP_Q[attr].format(relation=relation)
            ask(f"multi-{relation}-{attr}", text, "multi-hop", rel_label, facts[(name, attr)])
    rng.shuffle(questions)
    return Dataset("synthetic", "synthetic", [Haystack("synthetic", docs, questions)], CATEGORIES)


def load_synthetic(limit: int | None = None, seed: int = 7) -> Dataset:
    """The synthetic dataset, keeping the first ``limit`` questions (they are shuffled, so
    any prefix mixes the categories)."""
    ds = build_synthetic(seed)
    if limit is not None:
        hay = ds.haystacks[0]
        ds.haystacks[0] = Haystack(hay.hid, hay.documents, hay.questions[:limit])
    return ds

"""The texts a model's center is computed from (embeddings.vector_center): everyday chat of no user."""

# Everyday texts of no user: the center of a model's vectors is the mean of theirs (a center taken from users' vectors
# would outlive their erasure). Any fair sample of chat does: centered on these texts' mean, the nearest by signs keep
# the exact nearest as well as centered on the turns' own mean, far better than uncentered (docs/measurements/code.md).
REFERENCE_TEXTS: tuple[str, ...] = (
    "Good morning! How did you sleep?",
    "I'm going to the supermarket later, do we need anything?",
    "We watched a film last night and it was better than I expected.",
    "My sister is visiting next weekend with her two kids.",
    "The meeting moved to Thursday at three in the afternoon.",
    "I started running again, three times a week before work.",
    "Can you recommend a good book about history?",
    "The train was delayed for an hour because of the storm.",
    "I'm allergic to cats, so I can't stay at their place.",
    "We are planning a trip to the mountains in August.",
    "My new job starts on Monday and I'm a bit nervous.",
    "I cooked pasta with tomatoes and basil from the garden.",
    "The doctor said I should drink more water and rest.",
    "Our team won the match on Saturday, it was a close game.",
    "I have been learning to play the guitar for six months.",
    "The rent went up again, we might have to move.",
    "What time does the museum open on Sundays?",
    "I lost my keys this morning and found them in the fridge.",
    "Thanks for your help yesterday, it really made a difference.",
    "My grandmother turns ninety this year and we are throwing a party.",
    "The printer at the office broke down again.",
    "I'd like to save money for a new car next year.",
    "We adopted a dog from the shelter, his name is Max.",
    "It has been raining all week and I miss the sun.",
    "I finished the report and sent it to my manager.",
    "Do you think I should learn Spanish or Japanese?",
    "The kids have a school play on Friday evening.",
    "I feel tired lately, maybe I work too much.",
    "Let's meet at the coffee shop near the station.",
    "I painted the living room a light shade of green.",
    "He told me about his plans to open a small bakery.",
    "I'm reading a novel about a family in a small town.",
)

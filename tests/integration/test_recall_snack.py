"""The user who said they are allergic to peanuts, fifteen rounds and one conversation later, asks for a snack and
to be reminded of their allergies: the round's recalled block holds the allergy item. ("allergies" and
"allergic" stem differently in english, and the fifteen rounds about snacks share the question's other words.)"""

from __future__ import annotations

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.integration.test_round_recall import ask
from tests.long_term.test_forget import rounds
from tests.support import EchoChat

QUESTION = "Can you suggest a snack? Remember any allergies I have."


async def test_a_new_conversation_asking_for_a_snack_is_told_of_the_peanut_allergy(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    noise = [f"Lunch idea number {n}: suggest a snack to go with it, something quick." for n in range(1, 16)]
    await rounds(app, "food-1", ["I'm allergic to peanuts.", *noise])
    assert await memory.drain(timeout=30)
    items = [row[0] for row in query(database_url, "SELECT content FROM items WHERE NOT is_summary")]
    assert any("peanut" in item for item in items)

    given = await ask(memory, "food-2", "ana", QUESTION)
    block = given[0].text
    assert block.startswith("[Long-term memory: ")
    recalled = block.split("\n")
    allergy = [line for line in recalled if "allergic to peanuts" in line]
    assert allergy, block
    # The allergy comes before any of the noise that shares the question's words.
    first_noise = next(i for i, line in enumerate(recalled) if "Lunch idea" in line)
    assert recalled.index(allergy[0]) < first_noise

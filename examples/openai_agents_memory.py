"""An OpenAI Agents SDK agent with Memorist's memory tools.

The agent saves what the user tells it (add_memory) and, in a later conversation that
shares nothing with the first but the memory, looks it up (search_memories) before
answering.

    pip install 'memorist[openai-agents]'
    OPENAI_API_KEY=sk-... python examples/openai_agents_memory.py

OPENAI_BASE_URL points it at another server speaking OpenAI's Responses API.
"""

from agents import Agent, RunConfig, Runner

from memorist import Memory
from memorist.integrations.openai_agents import memory_tools

INSTRUCTIONS = (
    "You are a cooking assistant with a long-term memory. When the user tells you something "
    "about themselves, save each fact with add_memory. Before suggesting a dish, look up what "
    "you know about the user with search_memories."
)

# Memory("chef.db") would keep the memories across processes; this one lasts the script.
with Memory(":memory:") as memory:
    chef = Agent(name="Chef", instructions=INSTRUCTIONS, model="gpt-5-mini", tools=memory_tools(memory, user_id="sam"))
    config = RunConfig(tracing_disabled=True)  # keep this example's runs off OpenAI's trace dashboard

    first = Runner.run_sync(chef, "Hi! I'm vegetarian and I'm allergic to peanuts.", run_config=config)
    print("chef:", first.final_output)
    for fact in sorted(item["memory"] for item in memory.get_all(user_id="sam")["results"]):
        print("remembered:", fact)

    # A new conversation: its input holds nothing of the first one.
    second = Runner.run_sync(chef, "What should I cook tonight?", run_config=config)
    print("chef:", second.final_output)

"""A LangChain chat model with Memorist's memory tools.

The model saves what the user tells it (add_memory) and, in a later conversation that
shares nothing with the first but the memory, looks it up (search_memories) before
answering. The loop below runs the model's tool calls until it answers.

    pip install 'memorist[langchain]' langchain-openai
    OPENAI_API_KEY=sk-... python examples/langchain_memory.py

OPENAI_BASE_URL points it at another server speaking OpenAI's Chat Completions API.
"""

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from memorist import Memory
from memorist.integrations.langchain import memory_tools

INSTRUCTIONS = (
    "You are a cooking assistant with a long-term memory. When the user tells you something "
    "about themselves, save each fact with add_memory. Before suggesting a dish, look up what "
    "you know about the user with search_memories."
)


def chat(model, tools, text):
    """One conversation turn: the model's tool calls run until it answers."""
    by_name = {tool.name: tool for tool in tools}
    messages = [SystemMessage(INSTRUCTIONS), HumanMessage(text)]
    for _ in range(8):  # at most 8 rounds of tool calls
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return reply.content
        messages += [by_name[call["name"]].invoke(call) for call in reply.tool_calls]
    return "(no answer after 8 rounds of tool calls)"


# Memory("chef.db") would keep the memories across processes; this one lasts the script.
with Memory(":memory:") as memory:
    tools = memory_tools(memory, user_id="sam")
    model = ChatOpenAI(model="gpt-5-mini").bind_tools(tools)

    print("chef:", chat(model, tools, "Hi! I'm vegetarian and I'm allergic to peanuts."))
    for fact in sorted(item["memory"] for item in memory.get_all(user_id="sam")["results"]):
        print("remembered:", fact)

    # A new conversation: its messages hold nothing of the first one.
    print("chef:", chat(model, tools, "What should I cook tonight?"))

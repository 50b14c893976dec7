"""OpenAI's Responses API (/v1/responses): input items and fields translated at the edge into
the chat request every other API uses (schema.parse_chat: sampling, tools, constraint), output
items and stream events built from the same reply splitter, responses stored in Ember's home."""
